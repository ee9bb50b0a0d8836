import { useEffect, useState } from "react";
import type { StreamStatus } from "../hooks/sse";

/**
 * Where a page's live updates stand: "Live", "Connecting…", or, after the stream dropped,
 * "Live updates lost" with a countdown to the next try. Renders nothing when not following.
 */
export function LiveIndicator({ status }: { status: StreamStatus | null }) {
  const retryAt = status?.state === "reconnecting" ? status.retryAt : undefined;
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (retryAt === undefined) return;
    setNow(Date.now());
    const tick = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(tick);
  }, [retryAt]);

  if (!status || status.state === "closed") return null;
  let tone: string;
  let text: string;
  let detail = "";
  if (status.state === "open") {
    tone = "ok";
    text = "Live";
  } else if (status.state === "connecting") {
    tone = "neutral";
    text = "Connecting…";
  } else {
    tone = "warn";
    text = "Live updates lost";
    const seconds = retryAt === undefined ? 0 : Math.ceil((retryAt - now) / 1000);
    detail = seconds > 0 ? ` · retrying in ${seconds} s` : " · reconnecting…";
  }
  const title = status.state === "reconnecting" && status.error ? `${text}: ${status.error}` : undefined;
  return (
    <span className={`chip chip-${tone} live-indicator`} role="status" data-live={status.state} title={title}>
      {text}
      {/* the countdown changes every second: not read out */}
      {detail && <span aria-hidden="true">{detail}</span>}
    </span>
  );
}
