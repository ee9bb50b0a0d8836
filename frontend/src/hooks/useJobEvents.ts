import { useQueryClient } from "@tanstack/react-query";
import { useEffect } from "react";
import { getToken } from "../api/client";
import { followEvents } from "./sse";

/** Keeps a job's queries fresh from its event stream: status changes, approvals and new metric points. */
export function useJobEvents(jobId: string, live: boolean): void {
  const queryClient = useQueryClient();
  useEffect(() => {
    if (!live) return;
    const abort = new AbortController();
    let pending: ReturnType<typeof setTimeout> | null = null;
    const refreshMetrics = () => {
      if (pending) return;
      pending = setTimeout(() => {
        pending = null;
        void queryClient.invalidateQueries({ queryKey: ["metrics", jobId] });
      }, 750);
    };
    void followEvents({
      url: `/api/v1/jobs/${jobId}/events`,
      token: getToken(),
      signal: abort.signal,
      onEvent: (ev) => {
        if (ev.event === "metrics") refreshMetrics();
        else {
          void queryClient.invalidateQueries({ queryKey: ["job", jobId] });
          void queryClient.invalidateQueries({ queryKey: ["transitions", jobId] });
          if (ev.event === "checkpoint") void queryClient.invalidateQueries({ queryKey: ["checkpoints", jobId] });
          // a party answered: the job's approvals, and the waiting lists, changed
          if (ev.event === "approval") void queryClient.invalidateQueries({ queryKey: ["jobs"] });
        }
      },
    });
    return () => {
      abort.abort();
      if (pending) clearTimeout(pending);
    };
  }, [jobId, live, queryClient]);
}
