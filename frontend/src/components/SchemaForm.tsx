/** A form generated from a pydantic JSON Schema: one input per property, defaults filled in. */

export type JsonSchema = {
  type?: string | string[];
  title?: string;
  description?: string;
  default?: unknown;
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  items?: JsonSchema;
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
};

export type FieldKind = "integer" | "number" | "string" | "boolean" | "enum" | "json";

/** Follows $ref and single-member allOf; drops the null member of Optional[X]. */
export function resolveField(schema: JsonSchema, root: JsonSchema): { s: JsonSchema; nullable: boolean } {
  let s = schema;
  let nullable = false;
  for (let i = 0; i < 8; i++) {
    if (s.$ref) {
      const name = s.$ref.split("/").pop() ?? "";
      s = { ...(root.$defs?.[name] ?? {}), ...withoutRef(s) };
    } else if (s.allOf && s.allOf.length === 1) {
      s = { ...s.allOf[0], ...without(s, "allOf") };
    } else if (s.anyOf) {
      const rest = s.anyOf.filter((m) => m.type !== "null");
      nullable = nullable || rest.length < s.anyOf.length;
      if (rest.length !== 1) break;
      s = { ...rest[0], ...without(s, "anyOf") };
    } else break;
  }
  return { s, nullable };
}

function withoutRef(s: JsonSchema): JsonSchema {
  return without(s, "$ref");
}

function without(s: JsonSchema, key: keyof JsonSchema): JsonSchema {
  const copy = { ...s };
  delete copy[key];
  return copy;
}

export function fieldKind(s: JsonSchema): FieldKind {
  if (s.enum) return "enum";
  if (s.const !== undefined) return "enum";
  if (s.type === "integer") return "integer";
  if (s.type === "number") return "number";
  if (s.type === "string") return "string";
  if (s.type === "boolean") return "boolean";
  return "json";
}

/** The configuration a user starts from: every property's default. */
export function defaultsOf(schema: JsonSchema): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    if (prop.default !== undefined) out[name] = prop.default;
  }
  return out;
}

interface Props {
  schema: JsonSchema;
  value: Record<string, unknown>;
  onChange: (value: Record<string, unknown>) => void;
  errors: Record<string, string>;
  idPrefix?: string;
}

export function SchemaForm({ schema, value, onChange, errors, idPrefix = "cfg" }: Props) {
  const props = Object.entries(schema.properties ?? {});
  if (props.length === 0) return <p className="muted">This algorithm has no settings.</p>;
  return (
    <div className="form-grid">
      {props.map(([name, raw]) => {
        const { s, nullable } = resolveField(raw, schema);
        const id = `${idPrefix}-${name}`;
        const error = errors[name];
        const set = (v: unknown) => {
          const next = { ...value };
          if (v === undefined) delete next[name];
          else next[name] = v;
          onChange(next);
        };
        return (
          <div className={`field${error ? " has-error" : ""}`} key={name}>
            <label htmlFor={id}>{raw.title ?? s.title ?? name}</label>
            <FieldInput id={id} s={s} nullable={nullable} value={value[name]} set={set} error={error} />
            {(raw.description ?? s.description) && (
              <small className="muted">{raw.description ?? s.description}</small>
            )}
            {error && (
              <small className="error" id={`${id}-error`} role="alert">
                {error}
              </small>
            )}
          </div>
        );
      })}
    </div>
  );
}

interface FieldProps {
  id: string;
  s: JsonSchema;
  nullable: boolean;
  value: unknown;
  set: (v: unknown) => void;
  error?: string;
}

function FieldInput({ id, s, nullable, value, set, error }: FieldProps) {
  const common = { id, "aria-invalid": Boolean(error), "aria-describedby": error ? `${id}-error` : undefined };
  switch (fieldKind(s)) {
    case "boolean":
      return <input type="checkbox" {...common} checked={Boolean(value)} onChange={(e) => set(e.target.checked)} />;
    case "enum": {
      const options = s.enum ?? [s.const];
      return (
        <select {...common} value={value === undefined || value === null ? "" : String(value)} onChange={(e) => set(e.target.value === "" ? (nullable ? null : undefined) : options.find((o) => String(o) === e.target.value))}>
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
      return (
        <input
          type="number"
          {...common}
          step={fieldKind(s) === "integer" ? 1 : "any"}
          min={s.minimum ?? s.exclusiveMinimum}
          max={s.maximum ?? s.exclusiveMaximum}
          value={value === undefined || value === null ? "" : String(value)}
          onChange={(e) => set(e.target.value === "" ? (nullable ? null : undefined) : Number(e.target.value))}
        />
      );
    case "string":
      return (
        <input
          type="text"
          {...common}
          value={value === undefined || value === null ? "" : String(value)}
          onChange={(e) => set(e.target.value === "" && nullable ? null : e.target.value)}
        />
      );
    default:
      return <JsonInput {...common} value={value} set={set} />;
  }
}

function JsonInput(props: { id: string; value: unknown; set: (v: unknown) => void; "aria-invalid": boolean }) {
  const { id, value, set } = props;
  return (
    <textarea
      id={id}
      aria-invalid={props["aria-invalid"]}
      rows={3}
      spellCheck={false}
      defaultValue={value === undefined ? "" : JSON.stringify(value, null, 1)}
      onBlur={(e) => {
        const text = e.target.value.trim();
        if (text === "") return set(undefined);
        try {
          set(JSON.parse(text));
        } catch {
          set(text);
        }
      }}
    />
  );
}
