import { useQuery } from "@tanstack/react-query";
import { api, unwrap } from "../api/client";
import { pollEvery } from "./polling";

export function useAlgorithms() {
  return useQuery({
    queryKey: ["algorithms"],
    queryFn: async () => unwrap(await api.GET("/api/v1/algorithms")),
    staleTime: 60_000,
  });
}

export function useParties() {
  return useQuery({
    queryKey: ["parties"],
    queryFn: async () => unwrap(await api.GET("/api/v1/parties", { params: { query: { limit: 200 } } })),
  });
}

/** Every enabled party by name: whom a job can name, whoever is signed in. */
export function usePartyDirectory() {
  return useQuery({
    queryKey: ["parties", "directory"],
    queryFn: async () => unwrap(await api.GET("/api/v1/party-directory", { params: { query: { limit: 500 } } })),
    staleTime: 30_000,
  });
}

export function useWorkers(refetchMs = 5000) {
  return useQuery({
    queryKey: ["workers"],
    queryFn: async () => unwrap(await api.GET("/api/v1/workers", { params: { query: { limit: 200 } } })),
    refetchInterval: pollEvery(refetchMs),
  });
}

export const TERMINAL = new Set(["succeeded", "failed", "cancelled", "rejected"]);
export const JOB_STATUSES = ["pending", "queued", "running", "cancelling", "succeeded", "failed", "cancelled", "rejected"] as const;

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return "—";
  return new Date(iso).toLocaleString();
}

export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

export function ago(iso: string): string {
  const s = Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  return `${Math.round(s / 3600)}h ago`;
}
