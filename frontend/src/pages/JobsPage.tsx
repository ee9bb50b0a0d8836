import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { Link, useSearchParams } from "react-router-dom";
import { api, errorText, unwrap } from "../api/client";
import { AwaitingApprovals } from "../components/AwaitingApprovals";
import { StatusChip } from "../components/StatusChip";
import { pollEvery } from "../hooks/polling";
import { formatTime, JOB_STATUSES, useAlgorithms, useParties } from "../hooks/queries";
import { causeOf } from "../components/ErrorText";
import { durationOf, formatDuration } from "../components/JobOverview";
import { formatValue, unitOf } from "../components/metricFamilies";
import { headline, useDigests } from "../hooks/digests";
import { TagChips } from "../components/JobTags";
import type { JobDigest, JobSummary } from "../api/client";

/** Columns the server sorts by (over every page), and those sorted on this page only. */
const SERVER_SORTS: Record<string, string> = { name: "name", created: "created_at", priority: "priority" };
type PageSort = "duration" | "attempts" | "headline";

export function sortPage(rows: JobSummary[], by: PageSort, descending: boolean, digests: Map<string, JobDigest> | undefined, now = Date.now()): JobSummary[] {
  const key = (j: JobSummary): number | null => {
    if (by === "duration") return durationOf(j, now);
    if (by === "attempts") return digests?.get(j.id)?.attempts ?? null;
    return headline(digests?.get(j.id))?.value ?? null;
  };
  // jobs without the value go last either way
  return [...rows].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    if (ka === null || kb === null) return (ka === null ? 1 : 0) - (kb === null ? 1 : 0);
    return descending ? kb - ka : ka - kb;
  });
}

const PAGE = 20;

export function JobsPage() {
  const [params, setParams] = useSearchParams();
  const status = params.get("status") ?? "";
  const algorithm = params.get("algorithm") ?? "";
  const party = params.get("party") ?? "";
  const q = params.get("q") ?? "";
  const tag = params.get("tag") ?? "";
  const sort = params.get("sort") ?? "-created";
  const page = Number(params.get("page") ?? "0");
  const algorithms = useAlgorithms();
  const parties = useParties();

  const jobs = useQuery({
    queryKey: ["jobs", status, algorithm, party, q, tag, page, serverSort(sort)],
    queryFn: async () =>
      unwrap(
        await api.GET("/api/v1/jobs", {
          params: {
            query: {
              status: (status || undefined) as never,
              algorithm: algorithm || undefined,
              party: party || undefined,
              q: q || undefined,
              tag: tag || undefined,
              sort: serverSort(sort) as never,
              limit: PAGE,
              offset: page * PAGE,
            },
          },
        }),
      ),
    refetchInterval: pollEvery(3000),
    placeholderData: keepPreviousData,
  });

  const set = (key: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    if (key !== "page") next.delete("page");
    setParams(next, { replace: true });
  };
  const pages = Math.max(1, Math.ceil((jobs.data?.count ?? 0) / PAGE));
  const digests = useDigests(jobs.data?.data.map((j) => j.id) ?? [], 5000);
  const descending = sort.startsWith("-");
  const column = sort.replace(/^-/, "");
  const rows = jobs.data?.data ?? [];
  const shown = column in SERVER_SORTS ? rows : sortPage(rows, column as PageSort, descending, digests.data);
  const header = (key: string, label: string, title?: string) => (
    <th aria-sort={column === key ? (descending ? "descending" : "ascending") : "none"} title={title}>
      <button type="button" className="link sort" onClick={() => set("sort", column === key && !descending ? `-${key}` : column === key ? key : key === "name" ? key : `-${key}`)}>
        {label}
        {column === key ? (descending ? " ▼" : " ▲") : ""}
      </button>
    </th>
  );

  return (
    <>
      <div className="row spread">
        <h2>Jobs</h2>
        <Link className="button" to="/jobs/new">
          New job
        </Link>
      </div>
      <AwaitingApprovals />
      <div className="panel row" role="search">
        <label>
          <span className="visually-hidden">Search by name</span>
          <input type="search" placeholder="Search by name" value={q} onChange={(e) => set("q", e.target.value)} />
        </label>
        <label>
          Status{" "}
          <select value={status} onChange={(e) => set("status", e.target.value)}>
            <option value="">any</option>
            {JOB_STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Algorithm{" "}
          <select value={algorithm} onChange={(e) => set("algorithm", e.target.value)}>
            <option value="">any</option>
            {algorithms.data?.map((a) => (
              <option key={a.name}>{a.name}</option>
            ))}
          </select>
        </label>
        <label>
          Party{" "}
          <select value={party} onChange={(e) => set("party", e.target.value)}>
            <option value="">any</option>
            {parties.data?.data.map((p) => (
              <option key={p.name}>{p.name}</option>
            ))}
          </select>
        </label>
        {tag && (
          <span className="row tag-filter" role="status" aria-label="Tag filter">
            Tagged <span className="chip chip-tag">{tag}</span>
            <button type="button" onClick={() => set("tag", "")} aria-label={`Clear the tag filter ${tag}`}>
              × Clear
            </button>
          </span>
        )}
      </div>
      {jobs.error && <p className="banner bad">{errorText(jobs.error)}</p>}
      <div className="panel" style={{ overflowX: "auto" }}>
        <table aria-label="Jobs">
          <thead>
            <tr>
              {header("name", "Name")}
              <th>Algorithm</th>
              <th>Status</th>
              <th>Parties</th>
              {header("created", "Created")}
              {header("duration", "Duration", "sorts this page")}
              {header("attempts", "Attempts", "sorts this page")}
              {header("headline", "Result", "the job's accuracy or AUC, else its loss; sorts this page")}
              <th>Reason</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((j) => (
              <tr key={j.id}>
                <td>
                  <Link to={`/jobs/${j.id}`}>{j.name}</Link> <TagChips tags={j.tags ?? []} onPick={(t) => set("tag", t)} />
                </td>
                <td className="mono">{j.algorithm}</td>
                <td>
                  <StatusChip status={j.status} reason={j.status === "pending" ? j.status_reason : null} />
                </td>
                <td>{j.parties.join(", ")}</td>
                <td>{formatTime(j.created_at)}</td>
                <td data-testid="duration">{durationText(j)}</td>
                <td>{digests.data?.get(j.id)?.attempts ?? "—"}</td>
                <td>
                  <Headline digest={digests.data?.get(j.id)} />
                </td>
                <td className="muted" title={j.status_reason || undefined}>
                  {causeOf(j.status_reason)}
                </td>
              </tr>
            ))}
            {jobs.data && jobs.data.data.length === 0 && (
              <tr>
                <td colSpan={9} className="muted">
                  No jobs match.
                </td>
              </tr>
            )}
          </tbody>
        </table>
        <nav className="row" aria-label="Pagination" style={{ marginTop: "0.75rem" }}>
          <button disabled={page <= 0} onClick={() => set("page", String(page - 1))}>
            Previous
          </button>
          <span>
            Page {page + 1} of {pages} · {jobs.data?.count ?? 0} jobs
          </span>
          <button disabled={page + 1 >= pages} onClick={() => set("page", String(page + 1))}>
            Next
          </button>
        </nav>
      </div>
    </>
  );
}

function serverSort(sort: string): string {
  const column = sort.replace(/^-/, "");
  const field = SERVER_SORTS[column];
  return field ? `${sort.startsWith("-") ? "-" : ""}${field}` : "-created_at";
}

function durationText(j: JobSummary): string {
  const ms = durationOf(j);
  return ms === null ? "—" : formatDuration(ms);
}

function Headline({ digest }: { digest: JobDigest | undefined }) {
  const h = headline(digest);
  if (!h) return <span className="muted">—</span>;
  return (
    <span>
      <span className="muted">{h.name}</span> {formatValue(h.value, unitOf(h.name))}
    </span>
  );
}
