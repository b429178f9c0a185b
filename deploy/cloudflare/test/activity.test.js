// node --test deploy/cloudflare/test: the Worker's keep-awake decision.
import { test } from "node:test";
import assert from "node:assert/strict";
import { jobsRunning, keepAwake } from "../src/activity.js";

// The lines gilf serve's /metrics writes for the gauge (cmd/gilf/serve_metrics.go).
const metrics = (n) => `# HELP gilf_jobs_claimed_total Review jobs this process claimed.
# TYPE gilf_jobs_claimed_total counter
gilf_jobs_claimed_total 7
# HELP gilf_jobs_running Review jobs this process is running now.
# TYPE gilf_jobs_running gauge
gilf_jobs_running ${n}
`;

const answer = (status, body) => async () => new Response(body, { status });

test("jobsRunning reads the gauge, not a neighbour", () => {
  assert.equal(jobsRunning(metrics(2)), 2);
  assert.equal(jobsRunning(metrics(0)), 0);
  assert.equal(jobsRunning("gilf_jobs_running_total 3\n"), undefined);
  assert.equal(jobsRunning("gilf_jobs_running NaN\n"), undefined);
  assert.equal(jobsRunning(""), undefined);
});

test("a running job keeps the container awake", async () => {
  assert.deepEqual(await keepAwake(answer(200, metrics(1))), { keep: true, why: "1 job(s) running" });
});

test("an idle container sleeps", async () => {
  assert.equal((await keepAwake(answer(200, metrics(0)))).keep, false);
});

test("an unreadable answer lets it sleep, and says why", async () => {
  assert.deepEqual(await keepAwake(answer(503, "store down")), { keep: false, why: "/metrics answered 503" });
  assert.equal((await keepAwake(answer(200, "# nothing\n"))).why, "no gilf_jobs_running in /metrics");
  const refused = await keepAwake(async () => { throw new Error("connection refused"); });
  assert.deepEqual(refused, { keep: false, why: "/metrics: connection refused" });
});
