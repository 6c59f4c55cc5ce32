//go:build ignore

// gen writes the demo's embedded sample from the shared tau2 traces with
// their conversation (the -conv file): the
// sessions of half the tasks to mine (mine.jsonl.gz), and a few dozen
// sessions of the other tasks to replay (replay.jsonl.gz). The split is the
// one ahead mine/eval/bench make with --split-by task_id --holdout 0.5.
//
//	go run gen.go /path/to/tau2-airline-retail-train-conv.jsonl.gz /path/to/tau2-airline-retail-train-conv.sessions.jsonl
package main

import (
	"compress/gzip"
	"fmt"
	"log"
	"os"
	"slices"

	"github.com/ahead-dev/ahead/trace"
)

const (
	replaySessions = 40
	// Long sessions would make the demo slow without showing more.
	maxThinkMS = 60_000
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: go run gen.go TRACES.jsonl.gz SESSIONS.jsonl")
	}
	sessions, err := trace.Collect(trace.NewReader(nil).Events(os.Args[1]))
	if err != nil {
		log.Fatal(err)
	}
	meta, err := trace.ReadMeta(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	split := &trace.Split{Field: "task_id", Holdout: 0.5, Meta: meta}
	var mine, candidates []trace.Session
	for _, s := range sessions {
		test, err := split.Test(s.ID)
		if err != nil {
			log.Fatal(err)
		}
		if !test {
			mine = append(mine, s)
			continue
		}
		think := 0.0
		for _, ev := range s.Events {
			if ev.LLMMS != nil {
				think += *ev.LLMMS
			} else {
				think += 1800
			}
		}
		if len(s.Events) >= 3 && think <= maxThinkMS {
			candidates = append(candidates, s)
		}
	}
	// A stable, spread-out choice: by hash of the session id.
	slices.SortFunc(candidates, func(a, b trace.Session) int {
		x, y := trace.KeyBucket(a.ID), trace.KeyBucket(b.ID)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	replay := candidates[:min(replaySessions, len(candidates))]
	write("mine.jsonl.gz", mine)
	write("replay.jsonl.gz", replay)
	fmt.Printf("mine: %d sessions; replay: %d sessions\n", len(mine), len(replay))
}

func write(name string, sessions []trace.Session) {
	f, err := os.Create(name)
	if err != nil {
		log.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression) // zero ModTime: reproducible bytes
	for _, s := range sessions {
		for ev := range trace.Known(s) { // calls and messages, as they became known
			if err := trace.EncodeLine(zw, ev); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
