const TONE: Record<string, string> = {
  pending: "neutral",
  assigned: "neutral",
  starting: "info",
  queued: "neutral",
  running: "info",
  cancelling: "warn",
  succeeded: "ok",
  failed: "bad",
  cancelled: "warn",
  rejected: "rejected",
  approved: "ok",
  online: "ok",
  offline: "neutral",
};

/** A status as a coloured chip; a reason (e.g. "waiting for approval by carol") rides along as its tooltip. */
export function StatusChip({ status, reason }: { status: string; reason?: string | null }) {
  const tone = status === "pending" && reason?.startsWith("waiting for approval") ? "awaiting" : (TONE[status] ?? "neutral");
  return (
    <span className={`chip chip-${tone}`} data-status={status} title={reason || undefined}>
      {status}
      {reason && <span className="visually-hidden">: {reason}</span>}
    </span>
  );
}
