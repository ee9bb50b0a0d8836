import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";

export type Schemas = components["schemas"];
export type JobPublic = Schemas["JobPublic"];
export type JobSummary = Schemas["JobSummary"];
export type AlgorithmPublic = Schemas["AlgorithmPublic"];
export type PartyPublic = Schemas["PartyPublic"];
export type PartyName = Schemas["PartyName"];
export type WorkerPublic = Schemas["WorkerPublic"];
export type Series = Schemas["Series"];
export type ApprovalPublic = Schemas["ApprovalPublic"];
export type PartyPolicy = Schemas["PartyPolicy"];
export type JobDigest = Schemas["JobDigest"];

/** Every error the control plane returns: RFC 9457 problem details with a stable code. */
export interface Problem {
  type?: string;
  title: string;
  status: number;
  detail?: string;
  code?: string;
  errors?: { loc: (string | number)[]; msg: string }[];
}

export class ApiError extends Error {
  constructor(public problem: Problem) {
    super(problem.detail ?? problem.title);
  }
}

const TOKEN_KEY = "tessera.token";
let token: string | null = typeof localStorage === "undefined" ? null : localStorage.getItem(TOKEN_KEY);

export function getToken(): string | null {
  return token;
}

export function setToken(next: string | null): void {
  token = next;
  if (next) localStorage.setItem(TOKEN_KEY, next);
  else localStorage.removeItem(TOKEN_KEY);
}

const auth: Middleware = {
  onRequest({ request }) {
    if (token) request.headers.set("Authorization", `Bearer ${token}`);
    return request;
  },
};

/** Whether the last request reached the server: a failed one (no answer at all) says no. */
type ConnectionListener = (reachable: boolean) => void;
let reachable = true;
const connectionListeners = new Set<ConnectionListener>();

export function serverReachable(): boolean {
  return reachable;
}

export function onConnectionChange(listener: ConnectionListener): () => void {
  connectionListeners.add(listener);
  return () => connectionListeners.delete(listener);
}

export function noteConnection(next: boolean): void {
  if (next === reachable) return;
  reachable = next;
  for (const l of connectionListeners) l(next);
}

/** A request that got no answer at all (server down, network gone), as opposed to an error answer. */
export function isNetworkError(err: unknown): boolean {
  return err instanceof TypeError;
}

export const api = createClient<paths>({
  baseUrl: typeof window === "undefined" ? "http://localhost" : window.location.origin,
  // looked up per request, so tests can stub the global fetch
  fetch: async (request: Request) => {
    try {
      const response = await globalThis.fetch(request);
      // a proxy in front of a stopped server answers for it, without the server's problem details
      const fromProxy = [502, 503, 504].includes(response.status) && !response.headers.get("content-type")?.includes("problem");
      noteConnection(!fromProxy);
      return response;
    } catch (err) {
      if (isNetworkError(err)) noteConnection(false);
      throw err;
    }
  },
});
api.use(auth);

/** The data of a response, or an ApiError carrying the problem details. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.error !== undefined || result.data === undefined) {
    if (result.response.status === 204) return undefined as T;
    const e = result.error as Partial<Problem> | undefined;
    throw new ApiError({
      title: e?.title ?? result.response.statusText ?? "Request failed",
      status: e?.status ?? result.response.status,
      detail: e?.detail,
      code: e?.code,
      errors: e?.errors,
      type: e?.type,
    });
  }
  return result.data;
}

/** Field errors of a validation problem, keyed by the path below `prefix` (e.g. "config"). */
export function fieldErrors(err: unknown, prefix: string): Record<string, string> {
  if (!(err instanceof ApiError)) return {};
  const out: Record<string, string> = {};
  for (const e of err.problem.errors ?? []) {
    const loc = e.loc.filter((p) => p !== "body");
    if (loc[0] === prefix) out[loc.slice(1).join(".") || "_"] = e.msg;
  }
  return out;
}

export function errorText(err: unknown): string {
  if (isNetworkError(err)) return "the server cannot be reached";
  if (err instanceof ApiError) {
    const p = err.problem;
    return `${p.title}${p.detail ? `: ${p.detail}` : ""}${p.code ? ` (${p.code})` : ""}`;
  }
  return err instanceof Error ? err.message : String(err);
}
