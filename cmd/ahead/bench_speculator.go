package main

import (
	"os"
	"strings"
	"time"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/speculator"
	"github.com/ahead-dev/ahead/trace"
)

// benchSpeculator turns --speculator into the bench's speculator: sim:ACC:LAT
// (a simulation that knows the true next call with probability ACC and
// answers LAT after the think window opens, scaled like every wait), or the
// base URL of an OpenAI-compatible server with --speculator-model.
func benchSpeculator(spec, model, keyEnv string, seed uint64, scale float64) (string, func(func(string, int, []predict.Prediction) bool, func(string) []trace.Event) (predict.Part, func(), error), error) {
	if strings.HasPrefix(spec, "sim:") {
		acc, lat, err := speculator.ParseSim(spec)
		if err != nil {
			return "", nil, usageErr("--speculator: %v", err)
		}
		return spec + " (a simulation, not a model)", func(offer func(string, int, []predict.Prediction) bool, truth func(string) []trace.Event) (predict.Part, func(), error) {
			s, err := speculator.NewSim(&speculator.SimOptions{
				Accuracy: acc, Latency: time.Duration(float64(lat) * scale), Seed: seed, Truth: truth, Offer: offer,
			})
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		}, nil
	}
	if model == "" {
		return "", nil, usageErr("--speculator URL needs --speculator-model (or give sim:ACC:LAT)")
	}
	key := ""
	if keyEnv != "" {
		if key = os.Getenv(keyEnv); key == "" {
			return "", nil, usageErr("--speculator-key-env: environment variable %s is not set", keyEnv)
		}
	}
	return spec + " (model " + model + ")", func(offer func(string, int, []predict.Prediction) bool, _ func(string) []trace.Event) (predict.Part, func(), error) {
		s, err := speculator.New(&speculator.Options{BaseURL: spec, Model: model, APIKey: key, Offer: offer})
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}, nil
}
