import { keepPreviousData, useQueries, useQuery } from "@tanstack/react-query";
import { useMemo, useState } from "react";
import { Link, useSearchParams } from "react-router-dom";
import { api, errorText, unwrap, type JobPublic } from "../api/client";
import { configDiff, jobTitle, metricNames } from "../components/compare";
import { LineChart, type Series } from "../components/LineChart";
import { formatterOf, formatValue, unitOf } from "../components/metricFamilies";
import { StatusChip } from "../components/StatusChip";
import { useDigests } from "../hooks/digests";
import { formatTime } from "../hooks/queries";

/** Several jobs side by side: one metric overlaid, the settings that differ, and the final numbers. */
export function ComparePage() {
  const [params, setParams] = useSearchParams();
  const selected = params.getAll("job");
  const [search, setSearch] = useState("");
  const found = useQuery({
    queryKey: ["jobs", "compare", search],
    queryFn: async () => unwrap(await api.GET("/api/v1/jobs", { params: { query: { limit: 50, q: search.trim() || undefined } } })),
    placeholderData: keepPreviousData,
  });
  const picked = useQueries({
    queries: selected.map((id) => ({
      queryKey: ["job", id],
      queryFn: async () => unwrap(await api.GET("/api/v1/jobs/{job_id}", { params: { path: { job_id: id } } })),
    })),
  });
  const jobs = picked.map((q) => q.data).filter((j): j is JobPublic => Boolean(j));
  const digests = useDigests(selected);
  const names = metricNames(selected.map((id) => digests.data?.get(id)));
  const metric = params.get("metric") ?? (names.includes("loss") ? "loss" : (names[0] ?? "loss"));
  const results = useQueries({
    queries: selected.map((id) => ({
      queryKey: ["metrics", id, "compare", metric],
      queryFn: async () =>
        unwrap(await api.GET("/api/v1/jobs/{job_id}/metrics", { params: { path: { job_id: id }, query: { names: [metric], max_points: 1000 } } })),
    })),
  });
  const titleOf = (id: string) => {
    const j = jobs.find((x) => x.id === id) ?? found.data?.data.find((x) => x.id === id);
    return j ? jobTitle(j) : id.slice(0, 8);
  };
  // one colour per job (the chart's palette follows series order), its ranks next to each other
  const series: Series[] = selected.flatMap((id, i) =>
    (results[i]?.data?.series ?? [])
      .slice()
      .sort((a, b) => a.rank - b.rank)
      .map((s) => ({ label: `${titleOf(id)} r${s.rank}`, points: s.points.map((p) => [p.step, p.value] as [number, number]) })),
  );
  const diff = useMemo(() => configDiff(jobs), [jobs]);

  const update = (ids: string[], nextMetric?: string) => {
    const next = new URLSearchParams(params);
    next.delete("job");
    ids.forEach((x) => next.append("job", x));
    if (nextMetric) next.set("metric", nextMetric);
    setParams(next, { replace: true });
  };
  const toggle = (id: string) => update(selected.includes(id) ? selected.filter((x) => x !== id) : [...selected, id]);
  const unit = unitOf(metric);
  const needle = search.trim().toLowerCase();
  const candidates = (found.data?.data ?? []).filter((j) => !needle || j.name.toLowerCase().includes(needle) || j.id.startsWith(needle));

  return (
    <>
      <h2>Compare</h2>
      <div className="compare">
        <section className="panel" aria-label="Pick jobs">
          <input type="search" placeholder="Search by name or id" aria-label="Search jobs" value={search} onChange={(e) => setSearch(e.target.value)} />
          {found.error && <p className="banner bad">{errorText(found.error)}</p>}
          <ul className="pick-list">
            {candidates.map((j) => (
              <li key={j.id}>
                <label>
                  <input type="checkbox" checked={selected.includes(j.id)} onChange={() => toggle(j.id)} /> <strong>{j.name}</strong>{" "}
                  <span className="muted">
                    {formatTime(j.created_at)} · <span className="mono">{j.id.slice(0, 8)}</span> · <span className="mono">{j.algorithm}</span>
                  </span>{" "}
                  <StatusChip status={j.status} />
                </label>
              </li>
            ))}
            {found.data && candidates.length === 0 && <li className="muted">No job matches.</li>}
          </ul>
        </section>
        <div>
          {selected.length === 0 ? (
            <p className="muted">Pick two or more jobs to compare.</p>
          ) : (
            <>
              <div className="row selected-jobs" aria-label="Selected jobs">
                {selected.map((id) => (
                  <span key={id} className="chip chip-neutral">
                    <Link to={`/jobs/${id}`}>{titleOf(id)}</Link>{" "}
                    <button type="button" className="sort" aria-label={`Remove ${titleOf(id)}`} onClick={() => toggle(id)}>
                      ×
                    </button>
                  </span>
                ))}
              </div>
              <label>
                Metric{" "}
                <select value={metric} onChange={(e) => update(selected, e.target.value)}>
                  {!names.includes(metric) && <option value={metric}>{metric}</option>}
                  {names.map((n) => (
                    <option key={n}>{n}</option>
                  ))}
                </select>
              </label>
              <LineChart title={`${metric} by job`} series={series} height={320} format={formatterOf(unit)} />
              <section className="panel" aria-label="Final metrics">
                <h3>Final metrics</h3>
                <table>
                  <thead>
                    <tr>
                      <th>Metric</th>
                      {selected.map((id) => (
                        <th key={id}>{titleOf(id)}</th>
                      ))}
                    </tr>
                  </thead>
                  <tbody>
                    {names.map((n) => (
                      <tr key={n}>
                        <td className="mono">{n}</td>
                        {selected.map((id) => {
                          const v = digests.data?.get(id)?.metrics[n];
                          return (
                            <td key={id} className="num" title={v ? `step ${v.step}, rank ${v.rank}` : undefined}>
                              {v ? formatValue(v.value, unitOf(n)) : "—"}
                            </td>
                          );
                        })}
                      </tr>
                    ))}
                  </tbody>
                </table>
              </section>
              <section className="panel" aria-label="Configuration differences">
                <h3>Configuration differences</h3>
                {jobs.length < 2 ? (
                  <p className="muted">Pick another job to see what differs.</p>
                ) : diff.length === 0 ? (
                  <p className="muted">The jobs ran with the same settings.</p>
                ) : (
                  <table>
                    <thead>
                      <tr>
                        <th>Setting</th>
                        {jobs.map((j) => (
                          <th key={j.id}>{jobTitle(j)}</th>
                        ))}
                      </tr>
                    </thead>
                    <tbody>
                      {diff.map((r) => (
                        <tr key={r.path}>
                          <td className="mono">{r.path}</td>
                          {r.values.map((v, i) => (
                            <td key={i} className="mono">
                              {v ?? <span className="muted">(default)</span>}
                            </td>
                          ))}
                        </tr>
                      ))}
                    </tbody>
                  </table>
                )}
              </section>
            </>
          )}
        </div>
      </div>
    </>
  );
}
