import { useQuery } from "@tanstack/react-query";
import { api, unwrap, type JobDigest } from "../api/client";
import { pollEvery } from "./polling";

/** Attempts and final metrics of jobs, read at once (at most 100). */
export function useDigests(ids: string[], refetchMs: number | false = false) {
  return useQuery({
    queryKey: ["digests", ...ids],
    queryFn: async () => {
      const list = unwrap(await api.GET("/api/v1/job-digests", { params: { query: { ids } } }));
      return new Map(list.map((d) => [d.id, d] as [string, JobDigest]));
    },
    enabled: ids.length > 0,
    refetchInterval: pollEvery(refetchMs),
  });
}

const HEADLINES = ["accuracy", "eval_accuracy", "auc", "eval_auc", "eval_loss", "loss"];

/** The metric a job is judged by: its accuracy or AUC where it has one, else its loss. */
export function headline(digest: JobDigest | undefined): { name: string; value: number } | null {
  if (!digest) return null;
  for (const name of HEADLINES) {
    const found = digest.metrics[name];
    if (found) return { name, value: found.value };
  }
  return null;
}
