import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { Link } from "react-router-dom";
import { api, errorText, fieldErrors, unwrap, type Schemas } from "../api/client";
import { useAuth } from "../auth";
import { PolicyPanel } from "../components/PolicyEditor";
import { StatusChip } from "../components/StatusChip";
import { ago, formatBytes, useParties, useWorkers } from "../hooks/queries";

/** The server's slug rule as an HTML `pattern`, which browsers compile with the `v` flag: a hyphen in a class is escaped there. */
export const SLUG_PATTERN = "[a-z][a-z0-9\\-]{0,62}";

export function PartiesPage() {
  const { identity } = useAuth();
  const parties = useParties();
  const workers = useWorkers(3000);
  const names = parties.data?.data.map((p) => p.name) ?? [];
  return (
    <>
      <h2>Parties &amp; workers</h2>
      {identity?.isAdmin && <CreateParty />}
      {parties.error && <p className="banner bad">{errorText(parties.error)}</p>}
      {parties.data?.data.map((p) => {
        const own = workers.data?.data.filter((w) => w.party === p.name) ?? [];
        return (
          <section key={p.name} className="panel" aria-label={`Party ${p.name}`}>
            <div className="row spread">
              <h3>
                {p.display_name || p.name} <span className="muted mono">{p.name}</span>
              </h3>
              {p.disabled && <StatusChip status="disabled" />}
            </div>
            {p.description && <p>{p.description}</p>}
            {(identity?.isAdmin || identity?.name === p.name) && (
              <PolicyPanel party={p.name} knownParties={names} open={identity?.name === p.name} />
            )}
            <div style={{ overflowX: "auto" }}>
              <table aria-label={`Workers of ${p.name}`}>
                <thead>
                  <tr>
                    <th>Host</th>
                    <th>Status</th>
                    <th>Heartbeat</th>
                    <th>CPU / memory</th>
                    <th>Accelerators</th>
                    <th>torch</th>
                    <th>Certificate</th>
                    <th>Running tasks</th>
                  </tr>
                </thead>
                <tbody>
                  {own.map((w) => (
                    <tr key={w.id}>
                      <td className="mono">{w.hostname}</td>
                      <td>
                        <StatusChip status={w.online ? "online" : "offline"} />
                      </td>
                      <td>{ago(w.last_heartbeat)}</td>
                      <td>
                        {w.cpu_count} CPU · {formatBytes(w.memory_bytes)}
                      </td>
                      <td>{w.accelerators.length ? w.accelerators.map((a) => `${a.name} (${formatBytes(a.free_memory)} / ${formatBytes(a.total_memory)} free)`).join("; ") : "—"}</td>
                      <td className="mono">{w.torch_version || "—"}</td>
                      <td>{certificateText(w.certificate_expires_at)}</td>
                      <td>
                        {!w.running_tasks?.length
                          ? "—"
                          : w.running_tasks.map((t) => (
                              <div key={t.task_id}>
                                <Link to={`/jobs/${t.job_id}`}>{t.job_name}</Link> <StatusChip status={t.status} />
                              </div>
                            ))}
                      </td>
                    </tr>
                  ))}
                  {own.length === 0 && (
                    <tr>
                      <td colSpan={8} className="muted">
                        No worker registered.
                      </td>
                    </tr>
                  )}
                </tbody>
              </table>
            </div>
          </section>
        );
      })}
    </>
  );
}

function CreateParty() {
  const queryClient = useQueryClient();
  const [name, setName] = useState("");
  const [displayName, setDisplayName] = useState("");
  const [created, setCreated] = useState<Schemas["PartyCreated"] | null>(null);
  const create = useMutation({
    mutationFn: async () =>
      unwrap(await api.POST("/api/v1/parties", { body: { name, display_name: displayName || null, description: "" } })),
    onSuccess: (party) => {
      setCreated(party);
      setName("");
      setDisplayName("");
      void queryClient.invalidateQueries({ queryKey: ["parties"] });
    },
  });
  const errors = fieldErrors(create.error, "name");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setCreated(null);
    create.mutate();
  };
  return (
    <form className="panel" onSubmit={submit} aria-label="Create a party">
      <h3>Create a party</h3>
      <div className="row">
        <div className="field">
          <label htmlFor="party-name">Slug name</label>
          <input id="party-name" value={name} onChange={(e) => setName(e.target.value)} required pattern={SLUG_PATTERN} />
        </div>
        <div className="field">
          <label htmlFor="party-display">Display name</label>
          <input id="party-display" value={displayName} onChange={(e) => setDisplayName(e.target.value)} />
        </div>
        <button className="primary" type="submit" disabled={create.isPending}>
          Create
        </button>
      </div>
      {create.error && (
        <p className="error" role="alert">
          {errors._ ?? errorText(create.error)}
        </p>
      )}
      {created && (
        <div className="banner ok" role="status">
          Party <strong>{created.name}</strong> created. Its token is shown only now:{" "}
          <code className="mono" data-testid="party-token">
            {created.token}
          </code>
        </div>
      )}
    </form>
  );
}

/** A worker's certificate as its party's identity on links to other parties. */
export function certificateText(expiresAt: string | null | undefined, now: Date = new Date()): string {
  if (!expiresAt) return "none (registered without one)";
  const days = Math.floor((new Date(expiresAt).getTime() - now.getTime()) / 86_400_000);
  if (days < 0) return "expired: restart the worker";
  return `valid ${days} more day${days === 1 ? "" : "s"}`;
}
