// Package bench replays recorded agent sessions through the real engine and
// measures what speculation gains, wastes and risks: ahead's replay
// benchmark (DESIGN.md, "Metrics").
//
// Each session is replayed as an agent: before each step it thinks for the
// step's recorded think time (llm_ms, or Options.ThinkDefault), then issues
// the step's calls together through engine.Call — the code path every
// front uses — against a replay backend (backend/replay) that answers with
// the recorded outputs after a modelled latency. (A call recorded after a
// write in its own step waits for the write, as the recording ordered them;
// see agent.waves.) Sessions are never ended early: what the engine
// speculates after a session's last call runs and counts as waste. Every mode replays the same
// sessions with the same latency draws and the same arrival times:
//
//   - serial: no speculation, the baseline;
//   - ahead: the real predictor under the operator's policy;
//   - oracle: a predictor that knows each step exactly at the start of its
//     think window, with unlimited slots and budget, under the same policy
//     (the ceiling of what any predictor could hide under that policy; it
//     knows the first step too, from the session's start, when the agent
//     begins the session in the engine);
//   - orion: pre-warming only (ORION-like): the most likely next tools are
//     warmed, never run;
//   - specfaas: the most likely next tool with the arguments of its
//     previous call in the session (SpecFaaS-like);
//   - all_wrong: a predictor whose predictions never match (a negative
//     control: speculation must not slow anyone down);
//   - aa: serial again (A/A, the noise floor).
//
// Time: all waits are scaled by Options.TimeScale; every reported figure is
// trace time. A session's time is the sum of its recorded think times and
// of its measured stalls (the time from issuing a step to its last result),
// so the harness's own timer overshoot does not count as agent time.
//
// Lossless: every authoritative result is compared with the recorded one.
// The replay backend answers a speculation that crosses a recorded write
// with a "stale" output, so a missing invalidation shows up as a mismatch.
package bench
