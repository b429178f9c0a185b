// What keeps the gilf container awake. The Worker asks the container's own
// /metrics when the sleepAfter window runs out: a container that is running
// a job stays up for another window, so no validation is stopped mid-run.

// jobsRunning reads the gilf_jobs_running gauge from a Prometheus text
// exposition; undefined when it is absent or not a number.
export function jobsRunning(text) {
  for (const line of String(text).split("\n")) {
    const m = /^gilf_jobs_running(?:\{[^}]*\})?\s+(\S+)/.exec(line.trim());
    if (m) {
      const n = Number(m[1]);
      return Number.isFinite(n) ? n : undefined;
    }
  }
  return undefined;
}

// keepAwake decides at the end of an activity window: true while gilf
// reports a running job. An unreadable answer is false: a container whose
// /metrics does not answer runs no job worth keeping, and stopping it bounds
// what a hung container costs.
export async function keepAwake(fetchMetrics) {
  try {
    const res = await fetchMetrics();
    if (!res.ok) return { keep: false, why: `/metrics answered ${res.status}` };
    const n = jobsRunning(await res.text());
    if (n === undefined) return { keep: false, why: "no gilf_jobs_running in /metrics" };
    return { keep: n > 0, why: `${n} job(s) running` };
  } catch (err) {
    return { keep: false, why: `/metrics: ${err && err.message ? err.message : err}` };
  }
}
