/** A failure as one line of cause, with the full text (a traceback) folded beneath it. */

/** The line that says what went wrong: what precedes a traceback, else its last line. */
export function causeOf(text: string): string {
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  if (lines.length === 0) return "";
  const marker = "Traceback (most recent call last)";
  const traceAt = lines.findIndex((l) => l.includes(marker));
  if (traceAt >= 0) {
    const head = [...lines.slice(0, traceAt), lines[traceAt].slice(0, lines[traceAt].indexOf(marker))];
    const before = head.join(" ").trim().replace(/[:\s]+$/, "");
    const last = [...lines.slice(traceAt + 1)].reverse().find((l) => !l.startsWith("File ") && !/^[\^~\s]+$/.test(l) && l !== "...");
    return before || last || lines[0];
  }
  return lines[0];
}

export function ErrorText({ text, className = "" }: { text: string | null | undefined; className?: string }) {
  if (!text) return null;
  const cause = causeOf(text);
  if (cause === text.trim()) return <span className={`error-text ${className}`}>{cause}</span>;
  return (
    <details className={`error-text ${className}`}>
      <summary>{cause}</summary>
      <pre className="mono error-details">{text}</pre>
    </details>
  );
}
