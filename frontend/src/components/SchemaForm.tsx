/**
 * A form generated from a pydantic JSON Schema: an input per field, nested objects as groups,
 * lists with add and remove, a union as a select with the chosen member's own fields, and the
 * server's errors at the field they name, at any depth.
 */
import { useMemo, useState } from "react";
import {
  defaultOf,
  fieldKind,
  memberIndex,
  memberLabel,
  memberValue,
  newItem,
  placeErrors,
  resolveField,
  unionMembers,
  type JsonSchema,
} from "./jsonSchema";

export { defaultsOf, initialValue, resolveField, withoutDefaults, fieldKind, type JsonSchema } from "./jsonSchema";

type Value = Record<string, unknown>;

interface Props {
  schema: JsonSchema;
  value: Value;
  onChange: (value: Value) => void;
  /** Server errors by dotted path below the configuration ("steps", "data.vocab", "_"). */
  errors: Record<string, string>;
  idPrefix?: string;
}

export function SchemaForm({ schema, value, onChange, errors, idPrefix = "cfg" }: Props) {
  const placed = useMemo(() => placeErrors(schema, errors), [schema, errors]);
  if (Object.keys(schema.properties ?? {}).length === 0) return <p className="muted">This algorithm has no settings.</p>;
  return (
    <>
      {placed._ && (
        <p className="error" role="alert" id={`${idPrefix}-error`}>
          {placed._}
        </p>
      )}
      <ObjectFields schema={schema} root={schema} value={value} set={(v) => onChange(v)} errors={placed} path="" idPrefix={idPrefix} />
    </>
  );
}

interface NodeProps {
  root: JsonSchema;
  errors: Record<string, string>;
  path: string;
  idPrefix: string;
}

const join = (path: string, seg: string | number) => (path ? `${path}.${seg}` : String(seg));
const idOf = (idPrefix: string, path: string) => `${idPrefix}-${path.replace(/\./g, "-")}`;

function ObjectFields({ schema, value, set, skip, ...node }: NodeProps & { schema: JsonSchema; value: Value; set: (v: Value) => void; skip?: string }) {
  return (
    <div className="form-grid">
      {Object.entries(schema.properties ?? {})
        .filter(([name]) => name !== skip)
        .map(([name, raw]) => (
          <Field
            key={name}
            name={name}
            raw={raw}
            required={schema.required?.includes(name) ?? false}
            value={value[name]}
            set={(v) => {
              const next = { ...value };
              if (v === undefined) delete next[name];
              else next[name] = v;
              set(next);
            }}
            {...node}
            path={join(node.path, name)}
          />
        ))}
    </div>
  );
}

interface FieldProps extends NodeProps {
  name: string;
  raw: JsonSchema;
  required: boolean;
  value: unknown;
  set: (v: unknown) => void;
}

function Field({ name, raw, required, value, set, ...node }: FieldProps) {
  const { s, nullable } = resolveField(raw, node.root);
  const kind = fieldKind(s);
  const id = idOf(node.idPrefix, node.path);
  const error = node.errors[node.path];
  const label = raw.title ?? s.title ?? name;
  const description = raw.description ?? s.description;
  const fallback = defaultOf(raw, node.root) === undefined && !required;
  const grouped = kind === "object" || kind === "array" || kind === "union";
  const message = error && (
    <small className="error" id={`${id}-error`} role="alert">
      {error}
    </small>
  );
  if (grouped) {
    return (
      <fieldset className={`field group${error ? " has-error" : ""}`} data-path={node.path} style={{ gridColumn: "1 / -1" }}>
        <legend id={`${id}-label`}>{label}</legend>
        {description && <small className="muted">{description}</small>}
        {message}
        {kind === "object" && (
          <ObjectFields schema={s} value={(value as Value | undefined) ?? {}} set={set} {...node} />
        )}
        {kind === "array" && <ListInput id={id} label={label} s={s} nullable={nullable} value={value} set={set} fallback={fallback} {...node} />}
        {kind === "union" && <UnionInput id={id} label={label} s={s} nullable={nullable} value={value} set={set} fallback={fallback} {...node} />}
      </fieldset>
    );
  }
  return (
    <div className={`field${error ? " has-error" : ""}`} data-path={node.path}>
      <label htmlFor={id}>{label}</label>
      <ScalarInput id={id} s={s} nullable={nullable} value={value} set={set} error={error} />
      {description && <small className="muted">{description}</small>}
      {message}
    </div>
  );
}

interface InputProps {
  id: string;
  s: JsonSchema;
  nullable: boolean;
  value: unknown;
  set: (v: unknown) => void;
  error?: string;
}

function ScalarInput({ id, s, nullable, value, set, error }: InputProps) {
  const common = { id, "aria-invalid": Boolean(error), "aria-describedby": error ? `${id}-error` : undefined };
  const empty = nullable ? null : undefined;
  switch (fieldKind(s)) {
    case "boolean":
      return <input type="checkbox" {...common} checked={Boolean(value)} onChange={(e) => set(e.target.checked)} />;
    case "enum": {
      const options = s.enum ?? [s.const];
      return (
        <select
          {...common}
          value={value === undefined || value === null ? "" : String(value)}
          onChange={(e) => set(e.target.value === "" ? empty : options.find((o) => String(o) === e.target.value))}
        >
          {(nullable || value === undefined) && <option value="">—</option>}
          {options.map((o) => (
            <option key={String(o)} value={String(o)}>
              {String(o)}
            </option>
          ))}
        </select>
      );
    }
    case "integer":
    case "number":
      return <NumberInput {...common} s={s} value={value} set={set} empty={empty} />;
    case "string":
      return (
        <input
          type="text"
          {...common}
          placeholder={nullable ? "none" : undefined}
          value={value === undefined || value === null ? "" : String(value)}
          onChange={(e) => set(e.target.value === "" && nullable ? null : e.target.value)}
        />
      );
    default:
      return <JsonInput {...common} value={value} set={set} />;
  }
}

/**
 * A number typed as text: "1e3" or "0." stay as typed while the value is the number they
 * mean; an integer field keeps integers (a fraction is sent as typed for the server to refuse).
 */
function NumberInput(props: { id: string; s: JsonSchema; value: unknown; set: (v: unknown) => void; empty: null | undefined; "aria-invalid": boolean; "aria-describedby"?: string }) {
  const { s, value, set, empty, ...common } = props;
  const shown = value === undefined || value === null ? "" : String(value);
  const [text, setText] = useState(shown);
  const parse = (t: string): unknown => {
    const trimmed = t.trim();
    if (trimmed === "") return empty;
    const n = Number(trimmed);
    return Number.isFinite(n) ? n : trimmed;
  };
  const display = parse(text) === value ? text : shown;
  return (
    <input
      type="text"
      inputMode={fieldKind(s) === "integer" ? "numeric" : "decimal"}
      {...common}
      placeholder={empty === null ? "none" : undefined}
      value={display}
      onChange={(e) => {
        setText(e.target.value);
        set(parse(e.target.value));
      }}
    />
  );
}

function JsonInput(props: { id: string; value: unknown; set: (v: unknown) => void; "aria-invalid": boolean; "aria-describedby"?: string }) {
  const { id, value, set } = props;
  const [bad, setBad] = useState<string | null>(null);
  return (
    <>
      <textarea
        id={id}
        aria-invalid={props["aria-invalid"] || bad !== null}
        aria-describedby={props["aria-describedby"]}
        rows={3}
        spellCheck={false}
        className="mono"
        placeholder='{"name": value}'
        defaultValue={value === undefined ? "" : JSON.stringify(value, null, 1)}
        onBlur={(e) => {
          const text = e.target.value.trim();
          setBad(null);
          if (text === "") return set(undefined);
          try {
            set(JSON.parse(text));
          } catch {
            setBad("not valid JSON");
          }
        }}
      />
      {bad && <small className="error">{bad}</small>}
    </>
  );
}

interface GroupProps extends NodeProps {
  id: string;
  label: string;
  s: JsonSchema;
  nullable: boolean;
  value: unknown;
  set: (v: unknown) => void;
  /** No declared default: without a value, the algorithm's own default applies. */
  fallback: boolean;
}

function ListInput({ id, label, s, nullable, value, set, fallback, ...node }: GroupProps) {
  const items = Array.isArray(value) ? value : [];
  const item = s.items ?? {};
  const max = s.maxItems ?? Infinity;
  const { s: itemSchema } = resolveField(item, node.root);
  const replace = (i: number, v: unknown) => set(items.map((x, j) => (j === i ? v : x)));
  return (
    <div className="list">
      {value === undefined && <p className="muted">The algorithm's default.</p>}
      {value === null && nullable && <p className="muted">None.</p>}
      {items.map((v, i) => {
        const path = join(node.path, i);
        const itemId = idOf(node.idPrefix, path);
        const error = node.errors[path];
        const kind = fieldKind(itemSchema);
        return (
          <div key={i} className={`row list-item${error ? " has-error" : ""}`} data-path={path}>
            {kind === "object" ? (
              <ObjectFields schema={itemSchema} value={(v as Value) ?? {}} set={(x) => replace(i, x)} {...node} path={path} />
            ) : (
              <ScalarInput id={itemId} s={itemSchema} nullable={false} value={v} set={(x) => replace(i, x)} error={error} />
            )}
            <button type="button" aria-label={`Remove ${label} ${i + 1}`} onClick={() => set(items.filter((_, j) => j !== i))}>
              Remove
            </button>
            {error && (
              <small className="error" id={`${itemId}-error`} role="alert">
                {error}
              </small>
            )}
          </div>
        );
      })}
      <div className="row">
        <button type="button" id={`${id}-add`} disabled={items.length >= max} onClick={() => set([...items, newItem(itemSchema, items[items.length - 1], node.root)])}>
          Add {label.toLowerCase()}
        </button>
        {value !== undefined && fallback && (
          <button type="button" onClick={() => set(undefined)}>
            Use the algorithm's default
          </button>
        )}
        {nullable && value !== null && (
          <button type="button" onClick={() => set(null)}>
            None
          </button>
        )}
      </div>
    </div>
  );
}

function UnionInput({ id, label, s, nullable, value, set, fallback, ...node }: GroupProps) {
  const members = unionMembers(s, node.root);
  const index = memberIndex(s, node.root, value);
  const member = members[index];
  const prop = s.discriminator?.propertyName;
  const choose = (i: number) => set(i === -1 ? undefined : i === -2 ? null : memberValue(s, members[i], node.root));
  const selected = value === undefined ? -1 : value === null ? -2 : index;
  return (
    <>
      <select id={id} aria-label={label} value={selected} onChange={(e) => choose(Number(e.target.value))}>
        {(fallback || value === undefined) && <option value={-1}>the algorithm's default</option>}
        {nullable && <option value={-2}>none</option>}
        {members.map((m, i) => (
          <option key={i} value={i}>
            {memberLabel(s, m)}
            {m.description ? ` — ${m.description.split("\n")[0]}` : ""}
          </option>
        ))}
      </select>
      {member && fieldKind(member) === "object" && (
        <ObjectFields schema={member} value={(value as Value) ?? {}} set={set} skip={prop} {...node} />
      )}
      {member && fieldKind(member) !== "object" && fieldKind(member) !== "union" && (
        <ScalarInput id={`${id}-value`} s={member} nullable={false} value={value} set={set} />
      )}
    </>
  );
}
