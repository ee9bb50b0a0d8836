import type { JobPublic } from "../api/client";
import { useAuth } from "../auth";
import { formatTime } from "../hooks/queries";
import { ApprovalActions } from "./ApprovalActions";
import { StatusChip } from "./StatusChip";

function decidedBy(by: string | null): string {
  if (by === null) return "—";
  return by === "policy" ? "policy (auto-approval)" : by;
}

/** Each party's answer to a job; Approve / Reject for the signed-in party while it has to answer. */
export function JobApprovals({ job }: { job: JobPublic }) {
  const { identity } = useAuth();
  const mine = identity && !identity.isAdmin ? job.approvals.find((a) => a.party === identity.name) : undefined;
  const mustAnswer = job.status === "pending" && mine?.decision === "pending";
  return (
    <section className={`panel${mustAnswer ? " awaiting" : ""}`} aria-label="Approvals">
      <h3>Approvals</h3>
      {mustAnswer && (
        <div style={{ marginBottom: "0.75rem" }}>
          <p>
            <strong>Your approval is needed</strong> before this job can run on {identity?.name}'s workers.
          </p>
          <ApprovalActions jobId={job.id} jobName={job.name} />
        </div>
      )}
      <div style={{ overflowX: "auto" }}>
        <table aria-label="Approvals by party">
          <thead>
            <tr>
              <th>Party</th>
              <th>Decision</th>
              <th>Decided by</th>
              <th>When</th>
              <th>Reason</th>
            </tr>
          </thead>
          <tbody>
            {job.approvals.map((a) => (
              <tr key={a.party} data-party={a.party}>
                <td>
                  {a.party}
                  {a.party === mine?.party && <span className="muted"> (you)</span>}
                </td>
                <td>
                  <StatusChip status={a.decision} />
                </td>
                <td>{decidedBy(a.decided_by)}</td>
                <td>{formatTime(a.decided_at)}</td>
                <td className="muted">{a.reason}</td>
              </tr>
            ))}
            {job.approvals.length === 0 && (
              <tr>
                <td colSpan={5} className="muted">
                  No approvals recorded.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </section>
  );
}
