import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "react-router-dom";
import { api, errorText, unwrap, type JobSummary } from "../api/client";
import { useAuth } from "../auth";
import { useAwaitingApproval } from "../hooks/approvals";
import { formatTime } from "../hooks/queries";
import { ApprovalActions, type Outcome } from "./ApprovalActions";

/**
 * "Waiting for your approval": the pending jobs the signed-in party must answer, each with
 * Approve and Reject. The admin, who answers for no party, sees which jobs wait on whom.
 * Renders nothing while the list is empty.
 */
export function AwaitingApprovals() {
  const { identity } = useAuth();
  const awaiting = useAwaitingApproval();
  const [notice, setNotice] = useState<{ ok: boolean; text: string } | null>(null);
  const isAdmin = Boolean(identity?.isAdmin);
  const jobs = awaiting.data?.data ?? [];

  const report = (name: string) => (o: Outcome) => {
    if ("error" in o) setNotice({ ok: false, text: `Could not ${o.verdict} ${name}: ${errorText(o.error)}` });
    else if (o.verdict === "reject") setNotice({ ok: true, text: `Rejected ${name}.` });
    else setNotice({ ok: true, text: `Approved ${name}: ${o.job.status === "pending" ? o.job.status_reason : `now ${o.job.status}`}.` });
  };

  if (awaiting.error) return <p className="banner bad">Waiting approvals: {errorText(awaiting.error)}</p>;
  if (jobs.length === 0 && !notice) return null;
  const title = isAdmin ? "Waiting for approval" : "Waiting for your approval";
  return (
    <section className="panel awaiting" aria-label={title}>
      <h3>
        {title} <span className="badge">{awaiting.data?.count ?? 0}</span>
      </h3>
      {notice && (
        <p className={`banner ${notice.ok ? "ok" : "bad"}`} role={notice.ok ? "status" : "alert"}>
          {notice.text}{" "}
          <button onClick={() => setNotice(null)} aria-label="Dismiss">
            ×
          </button>
        </p>
      )}
      {jobs.length === 0 ? (
        <p className="muted">Nothing left to answer.</p>
      ) : (
        <div style={{ overflowX: "auto" }}>
          <table aria-label={title}>
            <thead>
              <tr>
                <th>Job</th>
                <th>Algorithm</th>
                <th>Created by</th>
                <th>Parties</th>
                {isAdmin && <th>Waiting for</th>}
                <th>Created</th>
                {!isAdmin && <th>Your answer</th>}
              </tr>
            </thead>
            <tbody>
              {jobs.map((j) => (
                <tr key={j.id} data-job={j.id}>
                  <td>
                    <Link to={`/jobs/${j.id}`}>{j.name}</Link>
                    <JobPeek job={j} />
                  </td>
                  <td className="mono">{j.algorithm}</td>
                  <td>{j.creator}</td>
                  <td>{j.parties.join(", ")}</td>
                  {isAdmin && <td>{j.waiting_for.join(", ")}</td>}
                  <td>{formatTime(j.created_at)}</td>
                  {!isAdmin && (
                    <td>
                      <ApprovalActions jobId={j.id} jobName={j.name} onOutcome={report(j.name)} inlineErrors={false} />
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
          {(awaiting.data?.count ?? 0) > jobs.length && (
            <p className="muted">
              Showing the oldest {jobs.length} of {awaiting.data?.count}.
            </p>
          )}
        </div>
      )}
    </section>
  );
}

/** What the job would run: its configuration and who plays which role, fetched when opened. */
function JobPeek({ job }: { job: JobSummary }) {
  const [open, setOpen] = useState(false);
  const detail = useQuery({
    queryKey: ["job", job.id],
    queryFn: async () => unwrap(await api.GET("/api/v1/jobs/{job_id}", { params: { path: { job_id: job.id } } })),
    enabled: open,
  });
  return (
    <details className="peek" onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary className="muted">Configuration</summary>
      {detail.error && <p className="error">{errorText(detail.error)}</p>}
      {detail.data && (
        <>
          <ul className="mono">
            {detail.data.assignments.map((a, i) => (
              <li key={i}>
                {a.party} as {a.role}
                {a.dataset ? ` · ${a.dataset}` : ""}
                {a.processes > 1 ? ` · ${a.processes} processes` : ""}
              </li>
            ))}
          </ul>
          <pre className="mono">
            {configSummary(detail.data.config)}
          </pre>
        </>
      )}
    </details>
  );
}

/** One `key: value` line per setting; nested values as compact JSON. */
export function configSummary(config: Record<string, unknown>): string {
  const lines = Object.entries(config).map(([k, v]) => `${k}: ${typeof v === "object" && v !== null ? JSON.stringify(v) : String(v)}`);
  return lines.length ? lines.join("\n") : "(defaults)";
}
