package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/predict"
)

// TestOriginStats: the report form of an origin's counter, made in one
// place for /v1/stats and ahead bench, in the JSON /v1/stats serves.
func TestOriginStats(t *testing.T) {
	st := engine.OriginStats{Offered: 5, Started: 4, Reused: 2, Promoted: 1, Wasted: 1, Saved: 1500 * time.Millisecond, WastedTime: 250 * time.Millisecond}
	got, err := json.Marshal(NewStats(engine.Stats{Origins: map[predict.Origin]engine.OriginStats{predict.OriginPattern: st}}).Origins)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"` + string(predict.OriginPattern) + `":{"offered":5,"started":4,"reused":2,"promoted":1,"wasted":1,"saved_ms":1500,"wasted_ms":250}}`
	if string(got) != want {
		t.Errorf("origins %s, want %s", got, want)
	}
	half := func(d time.Duration) float64 { return ms(d) / 2 } // as bench unscales
	if r := NewOriginStats(st, half); r.SavedMS != 750 || r.WastedMS != 125 || r.Offered != 5 {
		t.Errorf("NewOriginStats with a time scale: %+v", r)
	}
}
