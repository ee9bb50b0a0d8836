import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, unwrap, type JobPublic, type PartyPolicy } from "../api/client";
import { pollEvery } from "./polling";

/** Key of the "waiting for your approval" list; under ["jobs"], so every jobs refresh includes it. */
export const AWAITING_KEY = ["jobs", "awaiting"] as const;

/** Pending jobs the signed-in party must still answer (the admin: any job waiting on a party). */
export function useAwaitingApproval(refetchMs = 5000) {
  return useQuery({
    queryKey: AWAITING_KEY,
    queryFn: async () =>
      unwrap(await api.GET("/api/v1/jobs", { params: { query: { awaiting_approval: true, sort: "created_at", limit: 50 } } })),
    refetchInterval: pollEvery(refetchMs),
  });
}

export type Verdict = "approve" | "reject";

export type Outcome = { verdict: Verdict; job: JobPublic } | { verdict: Verdict; error: unknown };

/**
 * Approves or rejects a job for the signed-in party and refreshes the job and the job lists
 * either way (a 409 means what is shown is stale). `onOutcome` runs even when the refresh
 * removes the component that asked, e.g. a row of the waiting list.
 */
export function useDecision(jobId: string, onOutcome?: (outcome: Outcome) => void) {
  const queryClient = useQueryClient();
  const refresh = () => {
    void queryClient.invalidateQueries({ queryKey: ["jobs"] });
    void queryClient.invalidateQueries({ queryKey: ["job", jobId] });
    void queryClient.invalidateQueries({ queryKey: ["transitions", jobId] });
  };
  return useMutation({
    mutationFn: async ({ verdict, reason }: { verdict: Verdict; reason: string }): Promise<JobPublic> => {
      const request = { params: { path: { job_id: jobId } }, body: { reason } };
      return verdict === "approve"
        ? unwrap(await api.POST("/api/v1/jobs/{job_id}/approve", request))
        : unwrap(await api.POST("/api/v1/jobs/{job_id}/reject", request));
    },
    onSuccess: (job, { verdict }) => {
      queryClient.setQueryData(["job", jobId], job);
      onOutcome?.({ verdict, job });
    },
    onError: (error, { verdict }) => onOutcome?.({ verdict, error }),
    onSettled: refresh,
  });
}

export function usePolicy(party: string) {
  return useQuery({
    queryKey: ["policy", party],
    queryFn: async () => unwrap(await api.GET("/api/v1/parties/{name}/policy", { params: { path: { name: party } } })),
  });
}

export function useSavePolicy(party: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: async (policy: PartyPolicy) =>
      unwrap(await api.PUT("/api/v1/parties/{name}/policy", { params: { path: { name: party } }, body: policy })),
    onSuccess: (saved) => queryClient.setQueryData(["policy", party], saved),
  });
}
