import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useMemo, useRef, useState } from "react";
import { useNavigate, useSearchParams } from "react-router-dom";
import { useAuth } from "../auth";
import { api, ApiError, errorText, fieldErrors, unwrap, type AlgorithmPublic, type JobPublic } from "../api/client";
import { MAX_TAGS, parseTags, TagChips, tagErrors } from "../components/JobTags";
import { merged, presetsFor } from "../components/presets";
import { draftsOf, initialAssignments, RoleAssignments, toAssignments, type AssignmentDraft } from "../components/RoleAssignments";
import { initialValue, SchemaForm, withoutDefaults, type JsonSchema } from "../components/SchemaForm";
import { useAlgorithms, usePartyDirectory, useWorkers } from "../hooks/queries";

const STEPS = ["Algorithm", "Configuration", "Roles", "Review"] as const;

type JobDevice = "auto" | "cpu" | "cuda";
type RolePublic = AlgorithmPublic["roles"][number];

/** Where a role's ranks can run, from the algorithm's device contract. */
export function runsOn(role: RolePublic): string {
  if (!role.devices.includes("cuda")) return "CPU";
  return role.gpu_benefit ? "GPU or CPU (faster on GPU)" : "CPU or GPU";
}

/** What a role's parties read of other parties' ranks (their own ranks' metrics they always read). */
export function seesOfOthers(role: RolePublic): string {
  return role.sees_metrics.includes("*") ? "every metric" : "how they run (no results, no logs)";
}

/** The name of a copy: "run (2)" from "run", "run (3)" from "run (2)". */
export function copyName(name: string): string {
  const m = /^(.*) \((\d+)\)$/.exec(name);
  return m ? `${m[1]} (${Number(m[2]) + 1})` : `${name} (2)`;
}

function newKey(): string {
  return typeof crypto !== "undefined" && "randomUUID" in crypto ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
}

export function NewJobPage() {
  const algorithms = useAlgorithms();
  const parties = usePartyDirectory();
  const workers = useWorkers();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const { identity } = useAuth();
  const [search] = useSearchParams();
  const from = search.get("from");
  const source = useQuery({
    queryKey: ["job", from],
    queryFn: async () => unwrap(await api.GET("/api/v1/jobs/{job_id}", { params: { path: { job_id: from ?? "" } } })),
    enabled: Boolean(from),
  });
  const [step, setStep] = useState(0);
  const [algorithm, setAlgorithm] = useState<AlgorithmPublic | null>(null);
  const [name, setName] = useState("");
  const [config, setConfig] = useState<Record<string, unknown>>({});
  const [device, setDevice] = useState<JobDevice>("auto");
  const [tagsText, setTagsText] = useState("");
  const [assignments, setAssignments] = useState<AssignmentDraft[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  // remounts the configuration form when its value is replaced as a whole (a preset, a copy)
  const [formKey, setFormKey] = useState(0);
  const idempotencyKey = useRef(newKey());

  const configErrors = useMemo(() => fieldErrors(error, "config"), [error]);
  const assignmentErrors = useMemo(() => fieldErrors(error, "assignments"), [error]);
  const [nameCheck, setNameCheck] = useState<string | null>(null);
  const nameError = useMemo(() => fieldErrors(error, "name")._, [error]) ?? nameCheck ?? undefined;
  const deviceError = useMemo(() => fieldErrors(error, "device")._, [error]);
  const tags = useMemo(() => parseTags(tagsText), [tagsText]);
  const [tagsCheck, setTagsCheck] = useState<string | null>(null);
  // the server's errors name the tags it was sent, which are the ones typed when it answered
  const sentTags = useRef<string[]>([]);
  const tagsError = useMemo(() => tagErrors(error, sentTags.current).join("; "), [error]) || tagsCheck || undefined;
  const partyList = parties.data?.data ?? [];

  const pick = (a: AlgorithmPublic) => {
    setAlgorithm(a);
    setConfig(initialValue(a.config_schema as JsonSchema));
    setAssignments(initialAssignments(a, partyList, workers.data?.data ?? []));
    setName((n) => n || `${a.name}-${new Date().toISOString().slice(0, 16).replace(/[-:T]/g, "")}`);
    setError(null);
    setStep(1);
  };

  // the parties, when they arrive after an algorithm was picked, fill rows that have none yet
  useEffect(() => {
    if (!algorithm || partyList.length === 0) return;
    setAssignments((rows) => (rows.length > 0 && rows.every((r) => !r.party) ? initialAssignments(algorithm, partyList, workers.data?.data ?? []) : rows));
  }, [parties.data]);

  // "Run again with changes": the form filled from the job, once both it and the algorithms load
  const cloned = useRef<string | null>(null);
  useEffect(() => {
    const job = source.data;
    if (!job || !algorithms.data || cloned.current === job.id) return;
    const a = algorithms.data.find((x) => x.name === job.algorithm);
    if (!a) return;
    cloned.current = job.id;
    fillFrom(job, a);
  }, [source.data, algorithms.data]);

  const fillFrom = (job: JobPublic, a: AlgorithmPublic) => {
    setAlgorithm(a);
    setConfig(merged(initialValue(a.config_schema as JsonSchema), job.config));
    setAssignments(draftsOf(job.assignments));
    setDevice((job.device ?? "auto") as JobDevice);
    setTagsText((job.tags ?? []).join(", "));
    setName(copyName(job.name));
    setFormKey((k) => k + 1);
    setError(null);
    setStep(1);
  };

  const applyPreset = (preset: Record<string, unknown>) => {
    if (!algorithm) return;
    setConfig(merged(initialValue(algorithm.config_schema as JsonSchema), preset));
    setFormKey((k) => k + 1);
    setError(null);
  };

  const next = () => {
    if (!name.trim()) {
      setNameCheck("a job needs a name");
      return;
    }
    setNameCheck(null);
    if (tags.length > MAX_TAGS) {
      setTagsCheck(`at most ${MAX_TAGS} tags, not ${tags.length}`);
      return;
    }
    setTagsCheck(null);
    setStep(2);
  };

  const submit = async () => {
    if (!algorithm || busy) return;
    setBusy(true);
    setError(null);
    try {
      const schema = algorithm.config_schema as JsonSchema;
      const body = {
        name,
        algorithm: algorithm.name,
        config: withoutDefaults(schema, config),
        device,
        assignments: toAssignments(assignments),
        // sent only when there are some, so a job without tags is the request it always was
        ...(tags.length ? { tags } : {}),
      };
      sentTags.current = tags;
      const job = unwrap(
        await api.POST("/api/v1/jobs", { body: body as never, headers: { "Idempotency-Key": idempotencyKey.current } }),
      );
      await queryClient.invalidateQueries({ queryKey: ["jobs"] });
      navigate(`/jobs/${job.id}`);
    } catch (err) {
      setError(err);
      if (err instanceof ApiError) {
        // a rejected request created nothing: a corrected one may reuse no key
        idempotencyKey.current = newKey();
        const onFirstStep = ["config", "device", "tags"].some((f) => Object.keys(fieldErrors(err, f)).length);
        if (onFirstStep) setStep(1);
        else if (Object.keys(fieldErrors(err, "assignments")).length) setStep(2);
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <h2>New job</h2>
      <ol className="steps" aria-label="Steps">
        {STEPS.map((s, i) => (
          <li key={s} aria-current={i === step ? "step" : undefined}>
            {i + 1}. {s}
          </li>
        ))}
      </ol>
      {error !== null && (
        <div className="banner bad" role="alert">
          {errorText(error)}
        </div>
      )}
      {from && source.error && <div className="banner bad">Could not load the job to copy: {errorText(source.error)}</div>}
      {from && step === 0 && !source.error && <p className="muted">Loading the job to copy…</p>}

      {step === 0 && (
        <div className="charts">
          {algorithms.data?.map((a) => (
            <section key={a.name} className="panel">
              <h3>
                {a.title} <span className="muted mono">{a.name}</span>
              </h3>
              <p>{a.description}</p>
              <table aria-label={`${a.name} roles`}>
                <thead>
                  <tr>
                    <th>Role</th>
                    <th>Parties</th>
                    <th>Does</th>
                    <th>Runs on</th>
                    <th>Sees of others</th>
                  </tr>
                </thead>
                <tbody>
                  {a.roles.map((r) => (
                    <tr key={r.name}>
                      <td className="mono">{r.name}</td>
                      <td>{r.max === r.min ? r.min : `${r.min}–${r.max ?? "∞"}`}</td>
                      <td>{r.description}</td>
                      <td title={r.device_note || undefined}>{runsOn(r)}</td>
                      <td title={r.sees_metrics.join(", ")}>{seesOfOthers(r)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
              <button className="primary" onClick={() => pick(a)} style={{ marginTop: "0.6rem" }}>
                Use {a.name}
              </button>
            </section>
          ))}
        </div>
      )}

      {step === 1 && algorithm && (
        <section className="panel">
          <div className={`field${nameError ? " has-error" : ""}`} style={{ marginBottom: "1rem" }}>
            <label htmlFor="job-name">Job name</label>
            <input
              id="job-name"
              value={name}
              onChange={(e) => setName(e.target.value)}
              required
              aria-invalid={Boolean(nameError)}
              aria-describedby={nameError ? "job-name-error" : undefined}
            />
            {nameError && (
              <small className="error" id="job-name-error" role="alert">
                {nameError}
              </small>
            )}
          </div>
          <div className={`field${deviceError ? " has-error" : ""}`} style={{ marginBottom: "1rem" }}>
            <label htmlFor="job-device">Device</label>
            <select id="job-device" value={device} onChange={(e) => setDevice(e.target.value as JobDevice)}>
              <option value="auto">auto: GPUs where a role benefits and the party has them</option>
              <option value="cuda">cuda: wait for a GPU for every role that can use one</option>
              <option value="cpu">cpu: CPUs only</option>
            </select>
            {deviceError && <small className="error">{deviceError}</small>}
          </div>
          <div className={`field${tagsError ? " has-error" : ""}`} style={{ marginBottom: "1rem" }}>
            <label htmlFor="job-tags">Tags</label>
            <input
              id="job-tags"
              value={tagsText}
              placeholder="baseline, sweep:lr"
              onChange={(e) => setTagsText(e.target.value)}
              aria-invalid={Boolean(tagsError)}
              aria-describedby={tagsError ? "job-tags-error" : "job-tags-help"}
            />
            {tagsError ? (
              <small className="error" id="job-tags-error" role="alert">
                {tagsError}
              </small>
            ) : (
              <small className="muted" id="job-tags-help">
                Separated by commas; up to {MAX_TAGS}, each a letter or digit followed by letters, digits, spaces or _ . : / -
              </small>
            )}
          </div>
          <div className="row" style={{ marginBottom: "1rem" }} role="group" aria-label="Presets">
            <span className="muted">Start from:</span>
            {presetsFor(algorithm.name).map((p) => (
              <button key={p.name} type="button" title={p.description} onClick={() => applyPreset(p.config)}>
                {p.name}
              </button>
            ))}
          </div>
          <SchemaForm key={formKey} schema={algorithm.config_schema as JsonSchema} value={config} onChange={setConfig} errors={configErrors} />
          <div className="row" style={{ marginTop: "1rem" }}>
            <button onClick={() => setStep(0)}>Back</button>
            <button className="primary" onClick={next}>
              Next: roles
            </button>
          </div>
        </section>
      )}

      {step === 2 && algorithm && (
        <section>
          <RoleAssignments
            algorithm={algorithm}
            parties={partyList}
            workers={workers.data?.data ?? []}
            value={assignments}
            onChange={setAssignments}
            errors={assignmentErrors}
            seesWorkersOf={(party) => Boolean(identity?.isAdmin) || party === identity?.name}
          />
          <div className="row">
            <button onClick={() => setStep(1)}>Back</button>
            <button className="primary" onClick={() => setStep(3)}>
              Next: review
            </button>
          </div>
        </section>
      )}

      {step === 3 && algorithm && (
        <section className="panel">
          <h3>{name}</h3>
          <p>
            Algorithm <span className="mono">{algorithm.name}</span> · device <span className="mono">{device}</span>
            {tags.length > 0 && (
              <>
                {" "}
                · tags <TagChips tags={tags} />
              </>
            )}
          </p>
          <h4>Configuration (what differs from the defaults)</h4>
          <pre className="mono">{JSON.stringify(withoutDefaults(algorithm.config_schema as JsonSchema, config), null, 2)}</pre>
          <h4>Roles</h4>
          <ul>
            {assignments.map((a, i) => (
              <li key={i}>
                <strong>{a.party}</strong> as <span className="mono">{a.role}</span> × {a.processes}
                {a.dataset && ` on ${a.dataset}`}
              </li>
            ))}
          </ul>
          <div className="row">
            <button onClick={() => setStep(2)}>Back</button>
            <button className="primary" onClick={submit} disabled={busy}>
              {busy ? "Creating…" : "Create job"}
            </button>
          </div>
        </section>
      )}
    </>
  );
}
