/** A job's configuration as a tree, each value the user chose (not the default) marked. */
import { deepEqual, defaultOf, fieldKind, memberIndex, resolveField, unionMembers, type JsonSchema } from "./jsonSchema";

type Value = Record<string, unknown>;

function isPlainObject(v: unknown): v is Value {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function show(v: unknown): string {
  if (v === null) return "none";
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** The schema of a value's fields, following a union to the member the value belongs to. */
function objectSchema(raw: JsonSchema | undefined, root: JsonSchema, value: unknown): JsonSchema | undefined {
  if (!raw) return undefined;
  const { s } = resolveField(raw, root);
  if (fieldKind(s) === "union") return unionMembers(s, root)[memberIndex(s, root, value)];
  return s;
}

export function ConfigTree({ config, schema }: { config: Value; schema?: JsonSchema }) {
  if (Object.keys(config).length === 0) return <p className="muted">No settings.</p>;
  return <Branch value={config} schema={schema} root={schema ?? {}} path="" />;
}

function Branch({ value, schema, root, path }: { value: Value; schema?: JsonSchema; root: JsonSchema; path: string }) {
  return (
    <ul className="config-tree">
      {Object.entries(value).map(([k, v]) => {
        const raw = schema?.properties?.[k];
        const d = raw ? defaultOf(raw, root) : undefined;
        const changed = d !== undefined && !deepEqual(v, d);
        const at = path ? `${path}.${k}` : k;
        const label = raw?.title ?? k;
        if (isPlainObject(v) && Object.keys(v).length) {
          return (
            <li key={k} data-path={at}>
              <span className="config-key" title={raw?.description}>
                {label}
              </span>
              <Branch value={v} schema={objectSchema(raw, root, v)} root={root} path={at} />
            </li>
          );
        }
        return (
          <li key={k} data-path={at} className={changed ? "changed" : undefined}>
            <span className="config-key" title={raw?.description}>
              {label}
            </span>{" "}
            <span className="mono">{show(v)}</span>
            {changed && (
              <span className="muted config-default" title="this job's value differs from the algorithm's default">
                {" "}
                (changed; default {show(d)})
              </span>
            )}
          </li>
        );
      })}
    </ul>
  );
}
