package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestReleaseConfig checks what the release configuration promises
// (issue 27) against the code it builds: static binaries of cmd/ahead for
// Linux, macOS and Windows on amd64 and arm64, the version stamped into
// the variable ahead version prints, checksums; and a container image
// FROM scratch holding the binary. goreleaser itself checks the file
// (./test.sh with AHEAD_RELEASE=1; building goreleaser takes minutes).
func TestReleaseConfig(t *testing.T) {
	data, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Version int `yaml:"version"`
		Builds  []struct {
			Main    string   `yaml:"main"`
			Env     []string `yaml:"env"`
			Ldflags []string `yaml:"ldflags"`
			Goos    []string `yaml:"goos"`
			Goarch  []string `yaml:"goarch"`
		} `yaml:"builds"`
		Checksum struct {
			Algorithm string `yaml:"algorithm"`
		} `yaml:"checksum"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Version != 2 || len(cfg.Builds) != 1 {
		t.Fatalf("want a goreleaser v2 file with one build, got version %d, %d builds", cfg.Version, len(cfg.Builds))
	}
	b := cfg.Builds[0]
	if b.Main != "./cmd/ahead" {
		t.Errorf("builds %q, want ./cmd/ahead", b.Main)
	}
	if !slices.Contains(b.Env, "CGO_ENABLED=0") {
		t.Errorf("env %q: without CGO_ENABLED=0 the binaries are not static", b.Env)
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		if !slices.Contains(b.Goos, goos) {
			t.Errorf("no %s build", goos)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		if !slices.Contains(b.Goarch, arch) {
			t.Errorf("no %s build", arch)
		}
	}
	// The ldflags stamp the variable ahead version prints.
	if !strings.Contains(strings.Join(b.Ldflags, " "), "-X main.version={{.Version}}") || version != "dev" {
		t.Errorf("ldflags %q do not stamp main.version (which is %q unstamped)", b.Ldflags, version)
	}
	if cfg.Checksum.Algorithm != "sha256" {
		t.Errorf("checksum algorithm %q, want sha256", cfg.Checksum.Algorithm)
	}

	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var from []string
	for line := range strings.Lines(string(df)) {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "FROM" {
			from = append(from, f[1])
		}
	}
	if !slices.Equal(from, []string{"scratch"}) || !strings.Contains(string(df), "COPY ahead /ahead") {
		t.Errorf("Dockerfile: FROM %q; want only scratch, holding the binary", from)
	}
}
