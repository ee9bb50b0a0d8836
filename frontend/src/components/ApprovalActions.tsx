import { useId, useState, type FormEvent } from "react";
import { errorText } from "../api/client";
import { useDecision, type Outcome, type Verdict } from "../hooks/approvals";

export type { Outcome };

interface Props {
  jobId: string;
  jobName: string;
  /** Called after each answer, with the job as it is now or the API's error. */
  onOutcome?: (outcome: Outcome) => void;
  /** Show the API's error beside the buttons (off where the caller shows it). */
  inlineErrors?: boolean;
}

/** Approve, or reject with a reason, a pending job on behalf of the signed-in party. */
export function ApprovalActions({ jobId, jobName, onOutcome, inlineErrors = true }: Props) {
  const decision = useDecision(jobId, onOutcome);
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState("");
  const reasonId = useId();

  const answer = (verdict: Verdict, why: string) =>
    decision.mutate(
      { verdict, reason: why },
      {
        onSuccess: () => {
          setRejecting(false);
          setReason("");
        },
      },
    );
  const submitReject = (e: FormEvent) => {
    e.preventDefault();
    answer("reject", reason.trim());
  };

  return (
    <div className="approval-actions">
      {!rejecting ? (
        <div className="row">
          <button className="primary" onClick={() => answer("approve", "")} disabled={decision.isPending} aria-label={`Approve ${jobName}`}>
            Approve
          </button>
          <button className="danger" onClick={() => setRejecting(true)} disabled={decision.isPending} aria-label={`Reject ${jobName}`}>
            Reject…
          </button>
        </div>
      ) : (
        <form className="inline-form" onSubmit={submitReject} aria-label={`Reject ${jobName}`}>
          <label htmlFor={reasonId} className="visually-hidden">
            Reason for rejecting {jobName}
          </label>
          <textarea
            id={reasonId}
            rows={2}
            maxLength={2000}
            placeholder="Reason (shown to the other parties)"
            value={reason}
            onChange={(e) => setReason(e.target.value)}
            autoFocus
          />
          <button className="danger" type="submit" disabled={decision.isPending}>
            Confirm reject
          </button>
          <button type="button" onClick={() => setRejecting(false)} disabled={decision.isPending}>
            Don&apos;t reject
          </button>
        </form>
      )}
      {inlineErrors && decision.error && (
        <p className="error" role="alert">
          {errorText(decision.error)}
        </p>
      )}
    </div>
  );
}
