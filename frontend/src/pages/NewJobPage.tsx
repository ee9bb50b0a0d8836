import { useQueryClient } from "@tanstack/react-query";
import { useMemo, useRef, useState } from "react";
import { useNavigate } from "react-router-dom";
import { api, ApiError, errorText, fieldErrors, unwrap, type AlgorithmPublic } from "../api/client";
import { initialAssignments, RoleAssignments, toAssignments, type AssignmentDraft } from "../components/RoleAssignments";
import { defaultsOf, SchemaForm, type JsonSchema } from "../components/SchemaForm";
import { useAlgorithms, useParties, useWorkers } from "../hooks/queries";

const STEPS = ["Algorithm", "Configuration", "Roles", "Review"] as const;

type JobDevice = "auto" | "cpu" | "cuda";
type RolePublic = AlgorithmPublic["roles"][number];

/** Where a role's ranks can run, from the algorithm's device contract. */
export function runsOn(role: RolePublic): string {
  if (!role.devices.includes("cuda")) return "CPU";
  return role.gpu_benefit ? "GPU or CPU (faster on GPU)" : "CPU or GPU";
}

function newKey(): string {
  return typeof crypto !== "undefined" && "randomUUID" in crypto ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
}

export function NewJobPage() {
  const algorithms = useAlgorithms();
  const parties = useParties();
  const workers = useWorkers();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [step, setStep] = useState(0);
  const [algorithm, setAlgorithm] = useState<AlgorithmPublic | null>(null);
  const [name, setName] = useState("");
  const [config, setConfig] = useState<Record<string, unknown>>({});
  const [device, setDevice] = useState<JobDevice>("auto");
  const [assignments, setAssignments] = useState<AssignmentDraft[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const idempotencyKey = useRef(newKey());

  const configErrors = useMemo(() => fieldErrors(error, "config"), [error]);
  const assignmentErrors = useMemo(() => fieldErrors(error, "assignments"), [error]);
  const nameError = useMemo(() => fieldErrors(error, "name")._, [error]);
  const deviceError = useMemo(() => fieldErrors(error, "device")._, [error]);
  const partyList = parties.data?.data.filter((p) => !p.disabled) ?? [];

  const pick = (a: AlgorithmPublic) => {
    setAlgorithm(a);
    setConfig(defaultsOf(a.config_schema as JsonSchema));
    setAssignments(initialAssignments(a, partyList));
    setName((n) => n || `${a.name}-${new Date().toISOString().slice(0, 16).replace(/[-:T]/g, "")}`);
    setError(null);
    setStep(1);
  };

  const submit = async () => {
    if (!algorithm || busy) return;
    setBusy(true);
    setError(null);
    try {
      const body = { name, algorithm: algorithm.name, config, device, assignments: toAssignments(assignments) };
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
        if (Object.keys(fieldErrors(err, "config")).length || fieldErrors(err, "device")._) setStep(1);
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
                  </tr>
                </thead>
                <tbody>
                  {a.roles.map((r) => (
                    <tr key={r.name}>
                      <td className="mono">{r.name}</td>
                      <td>{r.max === r.min ? r.min : `${r.min}–${r.max ?? "∞"}`}</td>
                      <td>{r.description}</td>
                      <td title={r.device_note || undefined}>{runsOn(r)}</td>
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
            <input id="job-name" value={name} onChange={(e) => setName(e.target.value)} required />
            {nameError && <small className="error">{nameError}</small>}
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
          <SchemaForm schema={algorithm.config_schema as JsonSchema} value={config} onChange={setConfig} errors={configErrors} />
          <div className="row" style={{ marginTop: "1rem" }}>
            <button onClick={() => setStep(0)}>Back</button>
            <button className="primary" onClick={() => setStep(2)}>
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
          </p>
          <h4>Configuration</h4>
          <pre className="mono">{JSON.stringify(config, null, 2)}</pre>
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
