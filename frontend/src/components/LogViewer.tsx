import { useQuery } from "@tanstack/react-query";
import { useEffect, useRef, useState } from "react";
import { api, unwrap, type Schemas } from "../api/client";
import { pollEvery } from "../hooks/polling";

type Line = Schemas["LogLinePublic"];
const MAX_LINES = 5000;

/** A task's log with follow mode: polls from a cursor and keeps the newest lines in view. */
export function LogViewer({ jobId, taskIds, live }: { jobId: string; taskIds: string[]; live: boolean }) {
  const [taskId, setTaskId] = useState<string>("");
  const [follow, setFollow] = useState(true);
  const [lines, setLines] = useState<Line[]>([]);
  const cursor = useRef(0);
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    cursor.current = 0;
    setLines([]);
  }, [taskId, jobId]);

  useQuery({
    queryKey: ["logs", jobId, taskId],
    queryFn: async () => {
      const page = unwrap(
        await api.GET("/api/v1/jobs/{job_id}/logs", {
          params: { path: { job_id: jobId }, query: { task_id: taskId || undefined, after: cursor.current, limit: 1000 } },
        }),
      );
      if (page.data.length) {
        cursor.current = page.next_cursor;
        setLines((old) => [...old, ...page.data].slice(-MAX_LINES));
      }
      return page.next_cursor;
    },
    refetchInterval: pollEvery(live && follow ? 1500 : false),
  });

  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines, follow]);

  return (
    <section className="panel" aria-label="Logs">
      <div className="row spread">
        <h3>Logs</h3>
        <div className="row">
          <label>
            Task{" "}
            <select value={taskId} onChange={(e) => setTaskId(e.target.value)}>
              <option value="">all tasks</option>
              {taskIds.map((t) => (
                <option key={t} value={t}>
                  {t.slice(0, 8)}
                </option>
              ))}
            </select>
          </label>
          <label>
            <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> Follow
          </label>
        </div>
      </div>
      <div className="logs" ref={box} tabIndex={0} aria-live={follow ? "polite" : "off"}>
        {lines.length === 0 ? (
          <span>No log lines yet.</span>
        ) : (
          lines.map((l) => (
            <div key={l.id}>
              <span style={{ opacity: 0.6 }}>{new Date(l.time).toLocaleTimeString()} r{l.rank} {l.level}</span> {l.message}
            </div>
          ))
        )}
      </div>
    </section>
  );
}
