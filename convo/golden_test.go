package convo

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenSets are the shared -conv traces whose held-out sessions
// TestPredictionsGolden replays: the model is mined on the rest and kept
// in testdata, so that the digest moves only when prediction does, not
// when mining does.
var goldenSets = []struct {
	name, field string
	match       *regexp.Regexp
}{
	{"tau2-airline-retail-train-conv", "task_id", nil},
	{"minisweagent-train-conv", "task_id", regexp.MustCompile(`^(.*)-[0-9]+$`)},
}

// TestPredictionsGolden replays the held-out sessions of the shared -conv
// traces through a Predictor serving a model kept in testdata (mined on
// the training part), and compares a digest of every prediction it made
// (tool, arguments and the bits of P, in order) with the golden one. A
// change that makes prediction faster must leave it unchanged; a change
// meant to alter predictions rewrites it with -update, saying why in
// its commit.
//
//	go test ./convo -run TestPredictionsGolden [-update]
func TestPredictionsGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, set := range goldenSets {
		t.Run(set.name, func(t *testing.T) {
			train, test := loadSplit(t, set.name, set.field, set.match)
			modelPath := filepath.Join("testdata", set.name+".model.json.gz")
			digestPath := filepath.Join("testdata", set.name+".predictions.sha256")
			if *update {
				writeModel(t, modelPath, mustMine(t, train))
			}
			m := readModel(t, modelPath)
			d := newPredDigest()
			replayDigest(New(m, nil), test, d)
			got := d.String()
			if *update {
				if err := os.WriteFile(digestPath, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(digestPath)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != strings.TrimSpace(string(want)) {
				t.Errorf("predictions of %d held-out sessions changed:\n got %s\nwant %s", len(test), got, strings.TrimSpace(string(want)))
			}
		})
	}
}

// predDigest hashes predictions in order, and counts them.
type predDigest struct {
	h      hash.Hash
	events int
	preds  int
}

func newPredDigest() *predDigest { return &predDigest{h: sha256.New()} }

func (d *predDigest) add(ps []predict.Prediction) {
	d.events++
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(ps)))
	d.h.Write(b[:])
	for _, p := range ps {
		d.preds++
		fmt.Fprintf(d.h, "%s\x00%s\x00%s\x00%v\x00", p.Tool, p.Args, p.Origin, p.Repeat)
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(p.P))
		d.h.Write(b[:])
	}
}

func (d *predDigest) String() string {
	return fmt.Sprintf("%x %d events %d predictions", d.h.Sum(nil), d.events, d.preds)
}

// replayDigest feeds each session to p as ahead serves it (its start,
// then what became known, in the order trace.Known gives) and adds every
// answer to d.
func replayDigest(p *Predictor, sessions []trace.Session, d *predDigest) {
	for _, s := range sessions {
		d.add(p.Start(s.ID))
		for ev := range trace.Known(s) {
			d.add(p.Observe(ev))
		}
		p.Forget(s.ID)
	}
}

func writeModel(t *testing.T, path string, m *Model) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readModel(t *testing.T, path string) *Model {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v (re-mine it with -update)", path, err)
	}
	return &m
}
