import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useCallback, useState } from "react";
import { Link, useParams } from "react-router-dom";
import { api, errorText, unwrap, type JobPublic } from "../api/client";
import { Checkpoints, completeSteps } from "../components/Checkpoints";
import { ConfigTree } from "../components/ConfigTree";
import { ErrorText } from "../components/ErrorText";
import { JobApprovals } from "../components/JobApprovals";
import { JobOverview } from "../components/JobOverview";
import { JobTags } from "../components/JobTags";
import type { JsonSchema } from "../components/jsonSchema";
import { RoleTable } from "../components/RoleTable";
import { LiveIndicator } from "../components/LiveIndicator";
import { LogViewer } from "../components/LogViewer";
import { MetricCharts } from "../components/MetricCharts";
import { StatusChip } from "../components/StatusChip";
import { pollEvery } from "../hooks/polling";
import { formatBytes, formatTime, TERMINAL, useAlgorithms, useWorkers } from "../hooks/queries";
import { useJobEvents } from "../hooks/useJobEvents";
import { useAuth } from "../auth";

export function JobDetailPage() {
  const { jobId = "" } = useParams();
  const queryClient = useQueryClient();
  const { identity } = useAuth();
  const job = useQuery({
    queryKey: ["job", jobId],
    queryFn: async () => unwrap(await api.GET("/api/v1/jobs/{job_id}", { params: { path: { job_id: jobId } } })),
    refetchInterval: (q) => pollEvery(q.state.data && TERMINAL.has(q.state.data.status) ? false : 5000)(q),
  });
  const live = Boolean(job.data && !TERMINAL.has(job.data.status));
  const algorithms = useAlgorithms();
  const workers = useWorkers(30_000);
  const liveStatus = useJobEvents(jobId, live);

  const metrics = useQuery({
    queryKey: ["metrics", jobId],
    queryFn: async () =>
      unwrap(await api.GET("/api/v1/jobs/{job_id}/metrics", { params: { path: { job_id: jobId }, query: { max_points: 1000 } } })),
    enabled: Boolean(job.data?.attempts.length),
  });
  const transitions = useQuery({
    queryKey: ["transitions", jobId],
    queryFn: async () => unwrap(await api.GET("/api/v1/jobs/{job_id}/transitions", { params: { path: { job_id: jobId } } })),
  });
  const checkpoints = useQuery({
    queryKey: ["checkpoints", jobId],
    queryFn: async () => unwrap(await api.GET("/api/v1/jobs/{job_id}/checkpoints", { params: { path: { job_id: jobId } } })),
  });

  const refresh = () => queryClient.invalidateQueries({ queryKey: ["job", jobId] });
  const cancel = useMutation({
    mutationFn: async () => unwrap(await api.POST("/api/v1/jobs/{job_id}/cancel", { params: { path: { job_id: jobId } } })),
    onSuccess: refresh,
  });
  const [retryStep, setRetryStep] = useState<string>("");
  const retry = useMutation({
    mutationFn: async () =>
      unwrap(
        await api.POST("/api/v1/jobs/{job_id}/retry", {
          params: { path: { job_id: jobId } },
          body: { step: retryStep === "" ? null : Number(retryStep) },
        }),
      ),
    onSuccess: refresh,
  });

  const partyOf = useCallback((rank: number) => (job.data ? partyOfRank(job.data, rank) : undefined), [job.data]);
  const rankLabel = useCallback(
    (rank: number) => {
      const party = job.data ? partyOfRank(job.data, rank) : undefined;
      return party ? `r${rank} ${party}` : `r${rank}`;
    },
    [job.data],
  );

  if (job.error && !job.data) return <p className="banner bad">{errorText(job.error)}</p>;
  if (!job.data) return <p>Loading…</p>;
  const j = job.data;
  const attempt = j.attempts[j.attempts.length - 1];
  const steps = completeSteps(checkpoints.data ?? [], attempt?.tasks.flatMap((t) => t.ranks.map((r) => r.rank)) ?? []);
  const bytesNow = lastValues(metrics.data?.series ?? [], "bytes_sent");
  const approvalsFirst = j.status === "pending" || j.status === "rejected";

  const schema = algorithms.data?.find((a) => a.name === j.algorithm)?.config_schema as JsonSchema | undefined;
  const failure = j.status === "failed" || j.status === "rejected" || j.status === "cancelled" ? j.status_reason : null;
  const bytesOf = (ranks: number[]) => formatBytes(ranks.reduce((n, r) => n + (bytesNow.get(r) ?? 0), 0));

  return (
    <>
      <div className="row spread">
        <h2>
          {j.name} <StatusChip status={j.status} reason={j.status === "pending" ? j.status_reason : null} />
        </h2>
        <div className="row">
          <LiveIndicator status={liveStatus} />
          <Link className="button" to={`/jobs/new?from=${j.id}`}>
            Run again with changes
          </Link>
          {!TERMINAL.has(j.status) && j.status !== "cancelling" && (
            <button className="danger" onClick={() => cancel.mutate()} disabled={cancel.isPending}>
              Cancel
            </button>
          )}
          {TERMINAL.has(j.status) && j.status !== "succeeded" && (
            <>
              <label>
                Resume from{" "}
                <select value={retryStep} onChange={(e) => setRetryStep(e.target.value)}>
                  <option value="">last checkpoint</option>
                  {steps.map((s) => (
                    <option key={s} value={s}>
                      step {s}
                    </option>
                  ))}
                </select>
              </label>
              <button onClick={() => retry.mutate()} disabled={retry.isPending}>
                Retry
              </button>
            </>
          )}
        </div>
      </div>
      {/* a failed refresh keeps what was shown, marked as possibly out of date */}
      {job.error && <p className="banner bad">Could not refresh this job: {errorText(job.error)}</p>}
      {(cancel.error || retry.error) && <p className="banner bad">{errorText(cancel.error ?? retry.error)}</p>}
      <p className="muted">
        <span className="mono">{j.algorithm}</span> · device {j.device ?? "auto"} · created {formatTime(j.created_at)} by {j.creator}
        {j.status_reason && !failure && <> · {j.status_reason}</>}
      </p>
      <JobTags job={j} identity={identity} />
      {failure && (
        <div className="banner bad job-failure" role="note" aria-label="Why the job ended">
          <ErrorText text={failure} />
        </div>
      )}
      {/* while consent is the question, the answers come first; afterwards below the tasks */}
      {approvalsFirst && <JobApprovals job={j} />}

      <JobOverview job={j} series={metrics.data?.series ?? []} />

      <section aria-label="Charts">
        <MetricCharts series={metrics.data?.series ?? []} rankLabel={rankLabel} partyOf={partyOf} jobId={jobId} />
      </section>

      <section className="panel" style={{ marginTop: "1rem", overflowX: "auto" }}>
        <h3>Roles {attempt && <span className="muted">(attempt {attempt.number})</span>}</h3>
        <RoleTable job={j} workers={workers.data?.data} bytesOf={attempt?.tasks.length ? bytesOf : undefined} />
      </section>

      <section className="panel" aria-label="Configuration">
        <h3>Configuration</h3>
        <ConfigTree config={j.config} schema={schema} />
      </section>

      {!approvalsFirst && <JobApprovals job={j} />}

      <LogViewer job={j} live={live} />

      <div className="charts">
        <section className="panel" aria-label="Timeline">
          <h3>Timeline</h3>
          <ol className="timeline">
            {transitions.data?.map((t, i) => (
              <li key={i}>
                <span className="muted">{formatTime(t.created_at)}</span> {t.entity} {t.from_status ?? "—"} → <strong>{t.to_status}</strong>
                {t.reason && (
                  <span className="muted">
                    {" "}
                    · <ErrorText text={t.reason} />
                  </span>
                )}
              </li>
            ))}
          </ol>
        </section>
        <section className="panel" aria-label="Artifacts">
          <h3>Artifacts</h3>
          <Checkpoints jobId={j.id} checkpoints={checkpoints.data ?? []} identity={identity} />
        </section>
      </div>
    </>
  );
}

function partyOfRank(job: JobPublic, rank: number): string | undefined {
  const attempt = job.attempts[job.attempts.length - 1];
  return attempt?.tasks.find((t) => t.ranks.some((r) => r.rank === rank))?.party;
}

function lastValues(series: { name: string; rank: number; points: { value: number }[] }[], name: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const s of series) if (s.name === name && s.points.length) out.set(s.rank, s.points[s.points.length - 1].value);
  return out;
}
