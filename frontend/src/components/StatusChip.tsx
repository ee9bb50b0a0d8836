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
  online: "ok",
  offline: "neutral",
};

export function StatusChip({ status }: { status: string }) {
  return (
    <span className={`chip chip-${TONE[status] ?? "neutral"}`} data-status={status}>
      {status}
    </span>
  );
}
