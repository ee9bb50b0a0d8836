/** Reading a pydantic JSON Schema: resolving references, kinds of fields, defaults, and paths. */

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
  minItems?: number;
  maxItems?: number;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  discriminator?: { propertyName: string; mapping?: Record<string, string> };
  items?: JsonSchema;
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
};

export type FieldKind = "integer" | "number" | "string" | "boolean" | "enum" | "object" | "array" | "union" | "json";

type Value = Record<string, unknown>;

function without(s: JsonSchema, key: keyof JsonSchema): JsonSchema {
  const copy = { ...s };
  delete copy[key];
  return copy;
}

function isNull(s: JsonSchema): boolean {
  return s.type === "null";
}

/** Follows $ref and single-member allOf/anyOf/oneOf; drops the null member of Optional[X]. */
export function resolveField(schema: JsonSchema, root: JsonSchema): { s: JsonSchema; nullable: boolean } {
  let s = schema;
  let nullable = false;
  for (let i = 0; i < 8; i++) {
    if (s.$ref) {
      const name = s.$ref.split("/").pop() ?? "";
      s = { ...(root.$defs?.[name] ?? {}), ...without(s, "$ref") };
    } else if (s.allOf && s.allOf.length === 1) {
      s = { ...s.allOf[0], ...without(s, "allOf") };
    } else if (s.anyOf || s.oneOf) {
      const key = s.anyOf ? "anyOf" : "oneOf";
      const members = s[key] ?? [];
      const rest = members.filter((m) => !isNull(m));
      nullable = nullable || rest.length < members.length;
      if (rest.length !== 1) {
        if (rest.length < members.length) s = { ...s, [key]: rest };
        break;
      }
      s = { ...rest[0], ...without(s, key) };
    } else break;
  }
  return { s, nullable };
}

export function fieldKind(s: JsonSchema): FieldKind {
  if (s.anyOf || s.oneOf) return "union";
  if (s.enum) return "enum";
  if (s.const !== undefined) return "enum";
  if (s.type === "integer") return "integer";
  if (s.type === "number") return "number";
  if (s.type === "string") return "string";
  if (s.type === "boolean") return "boolean";
  if (s.type === "array" && s.items) return "array";
  if (s.properties && Object.keys(s.properties).length) return "object";
  return "json";
}

/** The members of a union, resolved. */
export function unionMembers(s: JsonSchema, root: JsonSchema): JsonSchema[] {
  return (s.oneOf ?? s.anyOf ?? []).filter((m) => !isNull(m)).map((m) => resolveField(m, root).s);
}

/** The value a member's discriminator takes (e.g. "mlp"), or undefined without one. */
export function memberTag(union: JsonSchema, member: JsonSchema): string | undefined {
  const prop = union.discriminator?.propertyName;
  if (!prop) return undefined;
  const p = member.properties?.[prop];
  const tag = p?.const ?? p?.enum?.[0] ?? p?.default;
  return tag === undefined ? undefined : String(tag);
}

export function memberLabel(union: JsonSchema, member: JsonSchema): string {
  return memberTag(union, member) ?? member.title ?? String(member.type ?? "value");
}

function typeOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function accepts(member: JsonSchema, v: unknown): boolean {
  const t = typeOf(v);
  const k = fieldKind(member);
  if (k === "object" || k === "json") return t === "object";
  if (k === "enum") return (member.enum ?? [member.const]).some((o) => o === v);
  if (k === "number") return t === "number" || t === "integer";
  return k === t;
}

/** Which member of a union a value belongs to: by its discriminator, else by its type. */
export function memberIndex(union: JsonSchema, root: JsonSchema, value: unknown): number {
  const members = unionMembers(union, root);
  const prop = union.discriminator?.propertyName;
  if (prop && value && typeof value === "object") {
    const tag = (value as Value)[prop];
    const i = members.findIndex((m) => memberTag(union, m) === String(tag));
    if (i >= 0) return i;
  }
  if (value === undefined || value === null) return -1;
  return members.findIndex((m) => accepts(m, value));
}

/**
 * The value a form starts from: every default, and nested objects filled with their own
 * defaults. A field without a default (one the algorithm computes) is left out, so the
 * server's own default applies.
 */
export function initialValue(schema: JsonSchema, root: JsonSchema = schema): Value {
  const out: Value = {};
  for (const [name, raw] of Object.entries(schema.properties ?? {})) {
    const { s } = resolveField(raw, root);
    const d = raw.default !== undefined ? raw.default : s.default;
    if (d !== undefined) out[name] = structuredClone(d);
    else if (fieldKind(s) === "object") out[name] = initialValue(s, root);
  }
  return out;
}

/** Kept for callers that want only the top-level defaults. */
export function defaultsOf(schema: JsonSchema): Value {
  return initialValue(schema);
}

/** A new member of a union, with the member's defaults and its tag. */
export function memberValue(union: JsonSchema, member: JsonSchema, root: JsonSchema): unknown {
  const kind = fieldKind(member);
  if (kind === "object") {
    const v = initialValue(member, root);
    const prop = union.discriminator?.propertyName;
    const tag = memberTag(union, member);
    if (prop && tag !== undefined) v[prop] = member.properties?.[prop]?.const ?? tag;
    return v;
  }
  return newItem(member);
}

/** A new entry of a list: the item's default, the list's last entry, or the smallest valid value. */
export function newItem(item: JsonSchema, last?: unknown, root?: JsonSchema): unknown {
  if (item.default !== undefined) return structuredClone(item.default);
  if (last !== undefined) return structuredClone(last);
  switch (fieldKind(item)) {
    case "integer":
      return item.minimum ?? (item.exclusiveMinimum !== undefined ? Math.floor(item.exclusiveMinimum) + 1 : 1);
    case "number":
      return item.minimum ?? 1;
    case "boolean":
      return false;
    case "enum":
      return (item.enum ?? [item.const])[0];
    case "object":
      return initialValue(item, root ?? item);
    case "array":
      return [];
    default:
      return "";
  }
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => deepEqual((a as Value)[k], (b as Value)[k]));
}

function isPlainObject(v: unknown): v is Value {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A field's declared default, or undefined when the algorithm computes it. */
export function defaultOf(raw: JsonSchema, root: JsonSchema): unknown {
  return raw.default !== undefined ? raw.default : resolveField(raw, root).s.default;
}

/**
 * What a form submits: only what differs from the schema's defaults, so that the request
 * states what the user chose (options that only apply in another mode stay unset). A nested
 * object left at its defaults is dropped; a union member keeps its discriminator.
 */
export function withoutDefaults(schema: JsonSchema, value: Value, root: JsonSchema = schema): Value {
  const { s } = resolveField(schema, root);
  const out: Value = {};
  for (const [k, v] of Object.entries(value)) {
    const raw = s.properties?.[k];
    if (!raw) {
      out[k] = v;
      continue;
    }
    const d = defaultOf(raw, root);
    if (d !== undefined && deepEqual(v, d)) continue;
    const pruned = pruneNested(raw, v, root);
    if (pruned === undefined) continue;
    out[k] = pruned;
  }
  return out;
}

function pruneNested(raw: JsonSchema, v: unknown, root: JsonSchema): unknown {
  const { s } = resolveField(raw, root);
  const kind = fieldKind(s);
  if (kind === "object" && isPlainObject(v)) {
    const inner = withoutDefaults(s, v, root);
    const required = s.required ?? [];
    if (Object.keys(inner).length === 0 && required.length === 0 && defaultOf(raw, root) === undefined) return undefined;
    return inner;
  }
  if (kind === "union" && isPlainObject(v)) {
    const i = memberIndex(s, root, v);
    const member = unionMembers(s, root)[i];
    if (!member || fieldKind(member) !== "object") return v;
    const inner = withoutDefaults(member, v, root);
    const prop = s.discriminator?.propertyName;
    return prop && prop in v ? { [prop]: v[prop], ...inner } : inner;
  }
  return v;
}

/**
 * Where an error reported at `path` (dotted, as the server names it) is shown: the deepest
 * field of the form on that path. A discriminated union's tag in the path (pydantic's
 * `model.mlp.hidden`) is skipped; "_" is the form as a whole.
 */
export function fieldPath(schema: JsonSchema, path: string, root: JsonSchema = schema): string {
  if (path === "_" || path === "") return "_";
  const out: string[] = [];
  let node: JsonSchema | undefined = schema;
  for (const seg of path.split(".")) {
    if (!node) break;
    let { s } = resolveField(node, root);
    const kind = fieldKind(s);
    if (kind === "union") {
      const members = unionMembers(s, root);
      const tagged = members.find((m) => memberTag(s, m) === seg);
      if (tagged) {
        node = tagged;
        continue;
      }
      const holder = members.find((m) => m.properties?.[seg]);
      if (!holder) break;
      s = holder;
    }
    if (s.properties?.[seg]) {
      out.push(seg);
      node = s.properties[seg];
    } else if (fieldKind(s) === "array" && /^\d+$/.test(seg)) {
      out.push(seg);
      node = s.items;
    } else break;
  }
  return out.length ? out.join(".") : "_";
}

/**
 * The server's errors keyed by the field that shows them. A model-level message naming a
 * field ("Value error, bottom.out is required …") goes to that field.
 */
export function placeErrors(schema: JsonSchema, errors: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  const add = (key: string, msg: string) => {
    out[key] = out[key] ? `${out[key]}; ${msg}` : msg;
  };
  for (const [path, raw] of Object.entries(errors)) {
    const msg = raw.replace(/^Value error, /, "");
    let key = fieldPath(schema, path);
    if (key === "_") {
      const named = /^([A-Za-z_][\w]*(?:\.[\w]+)*)\b/.exec(msg)?.[1];
      if (named && schema.properties?.[named.split(".")[0]]) {
        const candidate = fieldPath(schema, named);
        if (candidate === named) key = candidate;
      }
    }
    add(key, msg);
  }
  return out;
}
