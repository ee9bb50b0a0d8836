import { useId, useState, type FormEvent } from "react";
import { errorText, fieldErrors, type AlgorithmPublic, type PartyPolicy } from "../api/client";
import { usePolicy, useSavePolicy } from "../hooks/approvals";
import { useAlgorithms } from "../hooks/queries";

/** The name a policy uses for jobs the admin creates. */
export const ADMIN = "admin";

export function policySummary(p: PartyPolicy): string {
  const from = p.auto_approve_from.length ? p.auto_approve_from.join(", ") : "nobody";
  const algorithms = p.algorithms === null ? "all shipped" : p.algorithms.length ? p.algorithms.join(", ") : "none";
  return `auto-approves jobs from ${from} · algorithms: ${algorithms} · custom code ${p.custom_code ? "on" : "off"}`;
}

interface PanelProps {
  party: string;
  /** Other parties' names that can be offered for auto-approval (a party token lists only itself). */
  knownParties: string[];
  open?: boolean;
}

/** A party's policy, summarised in one line and editable below it. */
export function PolicyPanel({ party, knownParties, open = false }: PanelProps) {
  const policy = usePolicy(party);
  const algorithms = useAlgorithms();
  return (
    <details className="policy" open={open}>
      <summary>
        <strong>Policy</strong>{" "}
        <span className="muted" data-testid={`policy-summary-${party}`}>
          {policy.data ? policySummary(policy.data) : policy.error ? errorText(policy.error) : "loading…"}
        </span>
      </summary>
      {policy.data && algorithms.data && (
        <PolicyForm
          key={party}
          party={party}
          policy={policy.data}
          knownParties={knownParties}
          algorithms={algorithms.data}
        />
      )}
      {algorithms.error && <p className="error">{errorText(algorithms.error)}</p>}
    </details>
  );
}

interface FormProps {
  party: string;
  policy: PartyPolicy;
  knownParties: string[];
  algorithms: AlgorithmPublic[];
}

/** Edits the whole policy and saves it with one PUT; the server's messages appear by field. */
export function PolicyForm({ party, policy, knownParties, algorithms }: FormProps) {
  const save = useSavePolicy(party);
  const [from, setFrom] = useState<string[]>(policy.auto_approve_from);
  const [extra, setExtra] = useState("");
  const [allAlgorithms, setAllAlgorithms] = useState(policy.algorithms === null);
  const [chosen, setChosen] = useState<string[]>(policy.algorithms ?? algorithms.map((a) => a.name));
  const [customCode, setCustomCode] = useState(policy.custom_code);
  const [sent, setSent] = useState<PartyPolicy | null>(null);
  const id = useId();

  // admin first, then every party we know of or the policy names, but never the party itself
  const candidates = [ADMIN, ...new Set([...knownParties, ...policy.auto_approve_from, ...from])].filter(
    (n, i, all) => n !== party && all.indexOf(n) === i,
  );
  const shipped = algorithms.map((a) => a.name);
  const algorithmChoices = [...shipped, ...chosen.filter((n) => !shipped.includes(n))];
  const toggle = (list: string[], name: string, on: boolean) => (on ? [...list, name] : list.filter((n) => n !== name));

  const fromErrors = namedErrors(fieldErrors(save.error, "auto_approve_from"), sent?.auto_approve_from);
  const algorithmErrors = namedErrors(fieldErrors(save.error, "algorithms"), sent?.algorithms ?? []);
  const customErrors = fieldErrors(save.error, "custom_code");
  const fieldCount = fromErrors.length + algorithmErrors.length + Object.keys(customErrors).length;

  const addExtra = () => {
    const name = extra.trim();
    if (name && !from.includes(name)) setFrom([...from, name]);
    setExtra("");
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const body: PartyPolicy = {
      auto_approve_from: from,
      algorithms: allAlgorithms ? null : algorithmChoices.filter((n) => chosen.includes(n)),
      custom_code: customCode,
    };
    setSent(body);
    save.mutate(body);
  };

  return (
    <form onSubmit={submit} aria-label={`Policy of ${party}`} style={{ marginTop: "0.75rem" }}>
      <fieldset className="plain" aria-describedby={fromErrors.length ? `${id}-from-error` : undefined}>
        <legend>Approve without asking the jobs created by</legend>
        <div className="checks">
          {candidates.map((name) => (
            <label key={name}>
              <input type="checkbox" checked={from.includes(name)} onChange={(e) => setFrom(toggle(from, name, e.target.checked))} />{" "}
              {name === ADMIN ? "admin" : name}
            </label>
          ))}
        </div>
        <div className="row" style={{ marginTop: "0.4rem" }}>
          <label>
            <span className="visually-hidden">Another party's name</span>
            <input
              placeholder="another party's name"
              value={extra}
              onChange={(e) => setExtra(e.target.value)}
              onKeyDown={(e) => {
                if (e.key === "Enter") {
                  e.preventDefault();
                  addExtra();
                }
              }}
            />
          </label>
          <button type="button" onClick={addExtra} disabled={!extra.trim()}>
            Add
          </button>
        </div>
        {fromErrors.length > 0 && (
          <small id={`${id}-from-error`} className="error" role="alert">
            {fromErrors.join("; ")}
          </small>
        )}
      </fieldset>

      <fieldset className="plain" aria-describedby={algorithmErrors.length ? `${id}-alg-error` : undefined}>
        <legend>Algorithms its workers run</legend>
        <div className="checks">
          <label>
            <input type="radio" name={`${id}-algs`} checked={allAlgorithms} onChange={() => setAllAlgorithms(true)} /> every shipped
            algorithm (also ones added later)
          </label>
          <label>
            <input type="radio" name={`${id}-algs`} checked={!allAlgorithms} onChange={() => setAllAlgorithms(false)} /> only these
          </label>
        </div>
        {!allAlgorithms && (
          <div className="checks" style={{ marginTop: "0.4rem" }}>
            {algorithmChoices.map((name) => (
              <label key={name} className="mono">
                <input type="checkbox" checked={chosen.includes(name)} onChange={(e) => setChosen(toggle(chosen, name, e.target.checked))} />{" "}
                {name}
              </label>
            ))}
          </div>
        )}
        {!allAlgorithms && chosen.length === 0 && <small className="muted">With none chosen, no job can use this party.</small>}
        {algorithmErrors.length > 0 && (
          <small id={`${id}-alg-error`} className="error" role="alert">
            {algorithmErrors.join("; ")}
          </small>
        )}
      </fieldset>

      <fieldset className="plain">
        <legend>Custom code</legend>
        <label>
          <input type="checkbox" checked={customCode} onChange={(e) => setCustomCode(e.target.checked)} /> run jobs whose configuration
          imports code by name (a custom model)
        </label>
        <br />
        <small className="muted">Its workers also need that code on their --allow-custom list.</small>
        {customErrors._ && (
          <small className="error" role="alert">
            {customErrors._}
          </small>
        )}
      </fieldset>

      <div className="row">
        <button className="primary" type="submit" disabled={save.isPending}>
          {save.isPending ? "Saving…" : "Save policy"}
        </button>
        {save.isSuccess && (
          <span className="muted" role="status">
            Saved.
          </span>
        )}
      </div>
      {save.error && fieldCount === 0 && (
        <p className="error" role="alert">
          {errorText(save.error)}
        </p>
      )}
    </form>
  );
}

/** Field errors of a list ("0": msg) as "name: msg", naming the entry the server refused. */
function namedErrors(errors: Record<string, string>, sent: string[] | null | undefined): string[] {
  return Object.entries(errors).map(([index, msg]) => {
    const name = sent?.[Number(index.split(".")[0])];
    return name !== undefined && index !== "_" ? `${name}: ${msg}` : msg;
  });
}
