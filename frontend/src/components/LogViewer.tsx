import { useQuery } from "@tanstack/react-query";
import { useEffect, useMemo, useRef, useState } from "react";
import { api, errorText, unwrap, type JobPublic } from "../api/client";
import { saveBlob } from "../api/save";
import { pollEvery } from "../hooks/polling";
import { filterLines, LEVELS, lineText, NO_FILTER, taskLabel, taskNames, type Line, type LogFilter } from "./logLines";

const MAX_LINES = 5000;
const PAGE = 1000;

async function readPage(jobId: string, after: number, limit = PAGE) {
  return unwrap(await api.GET("/api/v1/jobs/{job_id}/logs", { params: { path: { job_id: jobId }, query: { after, limit } } }));
}

/** Every line of the job, page by page, as a text file the browser saves. */
async function download(job: JobPublic, names: ReturnType<typeof taskNames>): Promise<void> {
  const out: string[] = [];
  let after = 0;
  for (;;) {
    const page = await readPage(job.id, after, 5000);
    for (const l of page.data) out.push(lineText(l, names, job.attempts.length));
    if (page.data.length < 5000) break;
    after = page.next_cursor;
  }
  const name = `${job.name.trim().replace(/[^\w.-]+/g, "_") || "job"}-${job.id.slice(0, 8)}.log`;
  saveBlob(new Blob([out.join("\n") + "\n"], { type: "text/plain" }), name);
}

/** The job's log, every task and rank, with filters by party, rank and level, search, follow and download. */
export function LogViewer({ job, live }: { job: JobPublic; live: boolean }) {
  const [filter, setFilter] = useState<LogFilter>(NO_FILTER);
  const [follow, setFollow] = useState(true);
  const [lines, setLines] = useState<Line[]>([]);
  const [saveError, setSaveError] = useState<string>("");
  const cursor = useRef(0);
  const box = useRef<HTMLDivElement>(null);
  const names = useMemo(() => taskNames(job), [job]);
  const attempts = job.attempts.length;

  useEffect(() => {
    cursor.current = 0;
    setLines([]);
  }, [job.id]);

  const logs = useQuery({
    queryKey: ["logs", job.id],
    queryFn: async () => {
      // a backlog is read page after page at once, not one page per poll
      for (;;) {
        const page = await readPage(job.id, cursor.current);
        if (page.data.length) {
          cursor.current = page.next_cursor;
          setLines((old) => {
            const last = old.length ? old[old.length - 1].id : 0;
            return [...old, ...page.data.filter((l) => l.id > last)].slice(-MAX_LINES);
          });
        }
        if (page.data.length < PAGE) return page.next_cursor;
      }
    },
    refetchInterval: pollEvery(live && follow ? 1500 : false),
  });
  // the ranks' last lines land before the job ends: read once more when it does
  const { refetch } = logs;
  const wasLive = useRef(live);
  useEffect(() => {
    if (wasLive.current && !live) void refetch();
    wasLive.current = live;
  }, [live, refetch]);

  const parties = useMemo(() => [...new Set([...names.values()].map((n) => n.party))].sort(), [names]);
  const ranks = useMemo(() => {
    const all = new Set<number>();
    for (const a of job.attempts) for (const t of a.tasks) for (const r of t.ranks) if (!filter.party || t.party === filter.party) all.add(r.rank);
    for (const l of lines) if (!filter.party || names.get(l.task_id)?.party === filter.party) all.add(l.rank);
    return [...all].sort((a, b) => a - b);
  }, [job, lines, names, filter.party]);
  const shown = useMemo(() => filterLines(lines, filter, names), [lines, filter, names]);
  const set = (patch: Partial<LogFilter>) => setFilter((f) => ({ ...f, ...patch }));

  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [shown, follow]);

  return (
    <section className="panel" aria-label="Logs">
      <div className="row spread">
        <h3>
          Logs{" "}
          <span className="muted" data-testid="log-count">
            {shown.length === lines.length ? `${lines.length} lines` : `${shown.length} of ${lines.length} lines`}
          </span>
        </h3>
        <div className="row log-filters">
          <label>
            Party{" "}
            <select value={filter.party} onChange={(e) => set({ party: e.target.value, rank: "" })}>
              <option value="">all</option>
              {parties.map((p) => (
                <option key={p} value={p}>
                  {p}
                </option>
              ))}
            </select>
          </label>
          <label>
            Rank{" "}
            <select value={filter.rank} onChange={(e) => set({ rank: e.target.value })}>
              <option value="">all</option>
              {ranks.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </label>
          <label>
            Level{" "}
            <select value={filter.minLevel} onChange={(e) => set({ minLevel: e.target.value })}>
              {LEVELS.slice(0, 4).map((l) => (
                <option key={l} value={l}>
                  {l === "debug" ? "all" : `${l} and above`}
                </option>
              ))}
            </select>
          </label>
          <input type="search" placeholder="Search" aria-label="Search the logs" value={filter.search} onChange={(e) => set({ search: e.target.value })} />
          <label>
            <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> Follow
          </label>
          <button
            type="button"
            onClick={() => {
              setSaveError("");
              download(job, names).catch((err) => setSaveError(errorText(err)));
            }}
          >
            Download
          </button>
        </div>
      </div>
      {saveError && <p className="banner bad">Could not download the log: {saveError}</p>}
      <div className="logs" ref={box} tabIndex={0} aria-live={follow ? "polite" : "off"}>
        {shown.length === 0 ? (
          <span>{lines.length === 0 ? "No log lines yet." : "No line matches the filters."}</span>
        ) : (
          shown.map((l) => (
            <div key={l.id} className={`log-line level-${l.level}`} data-task={l.task_id}>
              <span className="log-meta">
                {new Date(l.time).toLocaleTimeString()} {taskLabel(names.get(l.task_id), l.task_id, l.rank, attempts)} r{l.rank}{" "}
                <span className="log-level">{l.level}</span>
              </span>{" "}
              {l.message}
            </div>
          ))
        )}
      </div>
    </section>
  );
}
