// What keeps the gilf container awake. The Worker asks the container's own
// /metrics when the sleepAfter window runs out: a container that is running
// a job, or holds queued ones, stays up for another window, so no
// validation is stopped mid-run.

// gauge reads one sample of a Prometheus text exposition: the metric name
// and, when given, one label's value; undefined when absent or not a number.
function gauge(text, name, label, value) {
  for (const line of String(text).split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line.trim());
    if (!m || m[1] !== name) continue;
    if (label !== undefined) {
      const labels = m[2] || "";
      if (!labels.includes(`${label}="${value}"`)) continue;
    }
    const n = Number(m[3]);
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

// jobsRunning reads gilf_jobs_running, the jobs this process runs now.
export function jobsRunning(text) {
  return gauge(text, "gilf_jobs_running");
}

// jobsQueued reads gilf_jobs{state="queued"}, the store's queued jobs
// (retries included), where gilf serves it; undefined otherwise.
export function jobsQueued(text) {
  return gauge(text, "gilf_jobs", "state", "queued");
}

// keepAwake decides at the end of an activity window: true while gilf
// reports a running or a queued job. An unreadable answer is false: a
// container whose /metrics does not answer runs no job worth keeping, and
// stopping it bounds what a hung container costs.
export async function keepAwake(fetchMetrics) {
  try {
    const res = await fetchMetrics();
    if (!res.ok) return { keep: false, why: `/metrics answered ${res.status}` };
    const text = await res.text();
    const running = jobsRunning(text);
    if (running === undefined) return { keep: false, why: "no gilf_jobs_running in /metrics" };
    const queued = jobsQueued(text) ?? 0;
    return { keep: running > 0 || queued > 0, why: `${running} job(s) running, ${queued} queued` };
  } catch (err) {
    return { keep: false, why: `/metrics: ${err && err.message ? err.message : err}` };
  }
}
