// node --test deploy/cloudflare/test/*.test.js: the Worker's keep-awake decision.
import { test } from "node:test";
import assert from "node:assert/strict";
import { jobsQueued, jobsRunning, keepAwake } from "../src/activity.js";

// The lines gilf serve's /metrics writes (cmd/gilf/serve_metrics.go; the
// gilf_jobs{state} gauge where gilf serves it).
const metrics = (running, queued) => `# HELP gilf_jobs_claimed_total Review jobs this process claimed.
# TYPE gilf_jobs_claimed_total counter
gilf_jobs_claimed_total 7
# HELP gilf_jobs_running Review jobs this process is running now.
# TYPE gilf_jobs_running gauge
gilf_jobs_running ${running}
` + (queued === undefined ? "" : `# TYPE gilf_jobs gauge
gilf_jobs{state="done"} 4
gilf_jobs{state="queued"} ${queued}
gilf_jobs{state="running"} ${running}
`);

const answer = (status, body) => async () => new Response(body, { status });

test("the gauges are read by name and label, not a neighbour's", () => {
  assert.equal(jobsRunning(metrics(2)), 2);
  assert.equal(jobsRunning(metrics(0, 3)), 0);
  assert.equal(jobsQueued(metrics(0, 3)), 3);
  assert.equal(jobsQueued(metrics(1)), undefined);
  assert.equal(jobsRunning("gilf_jobs_running_total 3\n"), undefined);
  assert.equal(jobsRunning("gilf_jobs_running NaN\n"), undefined);
  assert.equal(jobsRunning(""), undefined);
});

test("a running job keeps the container awake", async () => {
  assert.deepEqual(await keepAwake(answer(200, metrics(1))), { keep: true, why: "1 job(s) running, 0 queued" });
});

test("a queued job keeps it awake too", async () => {
  assert.equal((await keepAwake(answer(200, metrics(0, 2)))).keep, true);
});

test("an idle container sleeps", async () => {
  assert.equal((await keepAwake(answer(200, metrics(0)))).keep, false);
  assert.equal((await keepAwake(answer(200, metrics(0, 0)))).keep, false);
});

test("an unreadable answer lets it sleep, and says why", async () => {
  assert.deepEqual(await keepAwake(answer(503, "store down")), { keep: false, why: "/metrics answered 503" });
  assert.equal((await keepAwake(answer(200, "# nothing\n"))).why, "no gilf_jobs_running in /metrics");
  const refused = await keepAwake(async () => { throw new Error("connection refused"); });
  assert.deepEqual(refused, { keep: false, why: "/metrics: connection refused" });
});
