package bench

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/ahead-dev/ahead/backend/replay"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/trace"
)

// demoData is a sample of real agent traces (see demodata/README.md): the
// sessions ahead demo mines and replays, and its policy. From a checkout
// they are files too, for ahead bench, mine and eval.
//
//go:embed demodata/mine.jsonl.gz demodata/replay.jsonl.gz demodata/policy.yaml
var demoData embed.FS

// The demo's fixed setup.
const (
	demoLatency     = "lognormal:600ms:1500ms"
	demoTimeScale   = 0.05
	demoConcurrency = 16
	demoSeed        = 1
)

// Demo runs ahead demo: it mines the embedded sample's training sessions,
// says so on w, and replays the held-out sessions in every mode. progress
// may be nil.
func Demo(ctx context.Context, w io.Writer, progress func(Progress)) (*Report, error) {
	toMine, err := demoSessions("demodata/mine.jsonl.gz")
	if err != nil {
		return nil, err
	}
	sessions, err := demoSessions("demodata/replay.jsonl.gz")
	if err != nil {
		return nil, err
	}
	data, err := fs.ReadFile(demoData, "demodata/policy.yaml")
	if err != nil {
		return nil, err
	}
	pol, err := policy.Parse(data, "demodata/policy.yaml")
	if err != nil {
		return nil, err
	}
	lat, err := replay.ParseLatency(demoLatency, demoSeed)
	if err != nil {
		return nil, err
	}
	o := &Options{
		Policy:      pol,
		Latency:     lat,
		TimeScale:   demoTimeScale,
		Concurrency: demoConcurrency,
		Seed:        demoSeed,
		Progress:    progress,
	}
	// The sample carries the conversation: the first calls are predicted
	// from what the customers said.
	t0 := time.Now()
	pool, _, err := o.MinePool(toMine)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "Mined %d patterns from %d real tau2 sessions in %.1fs; replaying %d sessions of other tasks\n",
		len(pool.Patterns), len(toMine), time.Since(t0).Seconds(), len(sessions))
	fmt.Fprintf(w, "through the engine in every mode, %g times faster than real time (figures in the agents' time).\n\n", 1/demoTimeScale)
	return Run(ctx, sessions, o)
}

func demoSessions(name string) ([]trace.Session, error) {
	f, err := demoData.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return trace.Collect(trace.NewReader(nil).Read(name, f))
}
