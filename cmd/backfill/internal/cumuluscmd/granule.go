// Package cumuluscmd is backfill's NASA Cumulus commands, wired from the
// cumulus/ packages: granule-id, cmr-temporal, granule-write,
// granule-recover and granule-schema.
package cumuluscmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/cumulus/granule"
	"github.com/backfill-dev/backfill/docs"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
)

type granuleConfig struct {
	collectionID     string
	hashLength       int
	includeTimestamp bool
	payload          string
	config           string
	risk, simulate   bool
	ingests          float64
	trials           int
	seed             uint64
	set              map[string]bool
}

func RunGranuleID(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("granule-id", docs.Help("granule-id"), std)
	var c granuleConfig
	fs.StringVar(&c.collectionID, "collection-id", "", "collection `ID` for IDs given without one")
	fs.IntVar(&c.hashLength, "hash-length", granule.DefaultHashLength, "suffix length `N`, 1..22 (--risk: 6..9)")
	fs.BoolVar(&c.includeTimestamp, "include-timestamp", false, "hash \"<collectionId>_<nanoseconds>\": IDs differ on every call, even within one nanosecond")
	fs.StringVar(&c.payload, "payload", "", "JSON payload `FILE` for the AddUniqueGranuleId task (\"-\": stdin)")
	fs.StringVar(&c.config, "config", "", "`FILE|JSON`: the task config {\"hashLength\":…, \"includeTimestampHashKey\":…}, a file or the JSON object itself")
	fs.BoolVar(&c.risk, "risk", false, "print collision probabilities")
	fs.BoolVar(&c.simulate, "simulate", false, "with --risk: measure the rate with real IDs")
	fs.Float64Var(&c.ingests, "ingests", 10000, "same-ID ingests `N` for --risk")
	fs.IntVar(&c.trials, "trials", 10000, "simulation runs `N`")
	fs.Uint64Var(&c.seed, "seed", 1, "seed `N` of the simulated collection IDs")
	args, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	c.set = map[string]bool{}
	for _, f := range cli.SetFlags(fs, "collection-id", "hash-length", "include-timestamp") {
		c.set[strings.TrimPrefix(f, "--")] = true
	}

	switch {
	case c.risk:
		if len(args) > 0 || c.payload != "" {
			return cli.Usagef("granule-id: --risk takes no IDs or payload")
		}
		return granuleRisk(c, std)
	case c.simulate:
		return cli.Usagef("granule-id: --simulate goes with --risk")
	case c.payload != "":
		if len(args) > 0 {
			return cli.Usagef("granule-id: --payload takes no IDs")
		}
		return granulePayload(c, std)
	case c.config != "":
		return cli.Usagef("granule-id: --config goes with --payload")
	}
	if err := granule.CheckHashLength(c.hashLength); err != nil {
		return cli.Usagef("granule-id: --hash-length: %v", err)
	}
	if len(args) == 0 {
		return cli.Usagef("granule-id: no ID given")
	}
	gen, _ := granule.NewGenerator(c.hashLength, c.includeTimestamp)
	if args[0] == "-" {
		if len(args) > 1 {
			return cli.Usagef("granule-id: no arguments allowed after -")
		}
		return granuleStream(ctx, gen, c.collectionID, c.set["collection-id"], std)
	}
	if !c.set["collection-id"] {
		return cli.Usagef("granule-id: --collection-id is required with ID arguments")
	}
	return granuleArgs(gen, c.collectionID, args, std)
}

// granuleArgs prints the unique granule ID of each ID argument.
func granuleArgs(gen *granule.Generator, collectionID string, ids []string, std cli.Stdio) error {
	out := bufio.NewWriter(std.Out)
	bad := 0
	var buf []byte
	var err error
	for _, id := range ids {
		buf, err = gen.Append(buf[:0], []byte(id), []byte(collectionID))
		if err != nil {
			bad++
			fmt.Fprintf(std.Err, "backfill: ID %q: %s\n", id, cli.Printable(err.Error()))
			continue
		}
		out.Write(append(buf, '\n'))
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if bad > 0 {
		return &cli.RejectsError{N: bad, What: "IDs"}
	}
	return nil
}

// granuleStream prints the unique granule ID of every line of stdin.
func granuleStream(ctx context.Context, gen *granule.Generator, defaultCollection string, hasDefault bool, std cli.Stdio) error {
	return cli.FilterLines(std, func(bad func(int, string)) (int, error) {
		return gen.Stream(ctx, std.In, std.Out, defaultCollection, hasDefault, bad)
	})
}

func granulePayload(c granuleConfig, std cli.Stdio) error {
	var cfg granule.TaskConfig
	if c.config != "" {
		raw := []byte(c.config)
		if !strings.HasPrefix(strings.TrimSpace(c.config), "{") {
			b, err := store.ReadRegular(c.config)
			if err != nil {
				return fmt.Errorf("read config: %w", err)
			}
			raw = b
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return cli.Usagef("granule-id: --config: not a JSON object: %v", err)
		}
	}
	if c.set["hash-length"] {
		if err := granule.CheckHashLength(c.hashLength); err != nil {
			return cli.Usagef("granule-id: --hash-length: %v", err)
		}
		cfg.HashLength = json.RawMessage(strconv.Itoa(c.hashLength))
	}
	if c.set["include-timestamp"] {
		cfg.IncludeTimestampHashKey = json.RawMessage(strconv.FormatBool(c.includeTimestamp))
	}
	if _, _, err := cfg.Settings(); err != nil {
		return cli.Usagef("granule-id: %v", err)
	}
	var payload []byte
	var err error
	if c.payload == "-" {
		payload, err = io.ReadAll(std.In)
	} else {
		payload, err = store.ReadRegular(c.payload)
	}
	if err != nil {
		return fmt.Errorf("read payload: %w", err)
	}
	out, err := granule.AddUniqueGranuleIDs(payload, cfg)
	if err != nil {
		problems := []error{err}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			problems = joined.Unwrap()
		}
		for _, p := range problems {
			fmt.Fprintf(std.Err, "backfill: payload %s: %s\n", c.payload, cli.Printable(p.Error()))
		}
		return &cli.RejectsError{N: len(problems), What: "payload problems", Verb: "found; payload rejected"}
	}
	if _, err := std.Out.Write(append(out, '\n')); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

func granuleRisk(c granuleConfig, std cli.Stdio) error {
	lengths := []int{6, 7, 8, 9}
	if c.set["hash-length"] {
		if err := granule.CheckHashLength(c.hashLength); err != nil {
			return cli.Usagef("granule-id: --hash-length: %v", err)
		}
		lengths = []int{c.hashLength}
	}
	if c.ingests < 0 || c.ingests != float64(int64(c.ingests)) {
		return cli.Usagef("granule-id: --ingests must be a whole number >= 0")
	}
	if !c.simulate {
		return granule.WriteRiskTable(std.Out, lengths, c.ingests)
	}
	switch {
	case !c.set["hash-length"]:
		return cli.Usagef("granule-id: --simulate needs one --hash-length (short ones, 1..4, show collisions quickly)")
	case c.trials < 1 || c.ingests > 1e7:
		return cli.Usagef("granule-id: --simulate needs --trials >= 1 and --ingests <= 10000000")
	}
	sim, err := granule.SimulateCollisions(c.hashLength, int(c.ingests), c.trials, rand.New(rand.NewPCG(c.seed, 0)))
	if err != nil {
		return err
	}
	return sim.WriteText(std.Out)
}
