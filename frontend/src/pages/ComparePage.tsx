import { useQueries, useQuery } from "@tanstack/react-query";
import { useSearchParams } from "react-router-dom";
import { api, unwrap } from "../api/client";
import { LineChart, type Series } from "../components/LineChart";

/** Overlays one metric of several jobs, e.g. `hier_sync` against `ddp`. */
export function ComparePage() {
  const [params, setParams] = useSearchParams();
  const selected = params.getAll("job");
  const metric = params.get("metric") ?? "loss";
  const jobs = useQuery({
    queryKey: ["jobs", "compare"],
    queryFn: async () => unwrap(await api.GET("/api/v1/jobs", { params: { query: { limit: 200 } } })),
  });
  const results = useQueries({
    queries: selected.map((id) => ({
      queryKey: ["metrics", id, "compare", metric],
      queryFn: async () =>
        unwrap(
          await api.GET("/api/v1/jobs/{job_id}/metrics", {
            params: { path: { job_id: id }, query: { names: [metric], max_points: 1000 } },
          }),
        ),
    })),
  });
  const nameOf = (id: string) => jobs.data?.data.find((j) => j.id === id)?.name ?? id.slice(0, 8);
  const series: Series[] = selected.flatMap((id, i) =>
    (results[i]?.data?.series ?? []).map((s) => ({
      label: `${nameOf(id)} r${s.rank}`,
      points: s.points.map((p) => [p.step, p.value] as [number, number]),
    })),
  );

  const toggle = (id: string) => {
    const next = new URLSearchParams(params);
    next.delete("job");
    const ids = selected.includes(id) ? selected.filter((x) => x !== id) : [...selected, id];
    ids.forEach((x) => next.append("job", x));
    setParams(next, { replace: true });
  };

  return (
    <>
      <h2>Compare</h2>
      <div className="panel row">
        <label>
          Metric{" "}
          <input
            value={metric}
            onChange={(e) => {
              const next = new URLSearchParams(params);
              next.set("metric", e.target.value);
              setParams(next, { replace: true });
            }}
          />
        </label>
        <span className="muted">e.g. loss, accuracy, auc, step_time_s, bytes_sent</span>
      </div>
      <LineChart title={`${metric} by job`} series={series} height={320} />
      <fieldset className="panel" style={{ marginTop: "1rem" }}>
        <legend>Jobs</legend>
        {jobs.data?.data.map((j) => (
          <label key={j.id} style={{ display: "block" }}>
            <input type="checkbox" checked={selected.includes(j.id)} onChange={() => toggle(j.id)} /> {j.name}{" "}
            <span className="muted mono">{j.algorithm}</span> <span className="muted">{j.status}</span>
          </label>
        ))}
      </fieldset>
    </>
  );
}
