package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/cumulus/granule"
	"github.com/backfill-dev/backfill/internal/cli"
)

const granuleHelp = `Usage: backfill granule-id --collection-id C [--hash-length N] [--include-timestamp] ID...
       backfill granule-id [--collection-id C] [--hash-length N] [--include-timestamp] -
       backfill granule-id --payload FILE|- [--config FILE|JSON] [--hash-length N] [--include-timestamp]
       backfill granule-id --risk [--hash-length N] [--ingests N]
       backfill granule-id --risk --simulate --hash-length N [--ingests N] [--trials N] [--seed N]

Make NASA Cumulus unique granule IDs, byte-identical to Cumulus v21
generateUniqueGranuleId: "<ID>_<hash>", where hash is the MD5 of the UTF-8
collection ID (with --include-timestamp: "<collectionId>_<nanoseconds>"),
base64url without padding, every '_' removed, cut to N characters. The ID
itself is not hashed: without the timestamp, every ID of a collection gets
the same suffix.

With IDs as arguments, print one unique ID per line.

With "-", read "ID<TAB>COLLECTION_ID" lines (or "ID" lines, with
--collection-id) from standard input and write
"UNIQUE_ID<TAB>ID<TAB>COLLECTION_ID" lines, streaming. A bad line (invalid
UTF-8, no collection, extra fields) is reported on standard error with its
line number and the rest are processed.

With --payload, apply the AddUniqueGranuleId task to a JSON payload
{"granules": [...], ...} and print the result as JSON: every other payload
key and granule field is kept; granules with a producerGranuleId pass
unchanged; the others get producerGranuleId = their granuleId and a unique
granuleId, with collectionId, or "<dataType>___<version>" when collectionId
is empty. The task config (--config FILE, a JSON object) is read as the task
reads it: hashLength is Number(hashLength) || 8, includeTimestampHashKey
defaults to false; --hash-length and --include-timestamp override it. A
payload with a bad granule is rejected whole, each bad granule reported.

With --risk, print for each hash length (default 6..9) the probability that
--ingests same-ID ingests with timestamped hashes produce a duplicate: the
Cumulus documentation's figure 1 - exp(-n^2/2d) with d = 64^N, the exact
birthday probability for 64^N, and the exact probability for the 63
symbols the suffix really uses ('_' is removed), which is higher. With
--simulate, measure that rate instead over --trials runs of real
timestamped IDs.

Flags:

	--collection-id C     collection ID for IDs given without one
	--hash-length N       suffix length, 1..22 (default 8; --risk: 6..9)
	--include-timestamp   hash "<collectionId>_<nanoseconds>": IDs differ on
	                      every call, even within one nanosecond
	--payload FILE        JSON payload for the AddUniqueGranuleId task ("-": stdin)
	--config FILE|JSON    the task config {"hashLength":…, "includeTimestampHashKey":…}:
	                      a file, or the JSON object itself
	--risk                print collision probabilities
	--ingests N           same-ID ingests for --risk (default 10000)
	--simulate            with --risk: measure the rate with real IDs
	--trials N            simulation runs (default 10000)
	--seed N              seed of the simulated collection IDs (default 1)

Examples:

	backfill granule-id --collection-id MOD09GQ___006 MOD09GQ.A2017224.h09v02.006.2017227165020
	  MOD09GQ.A2017224.h09v02.006.2017227165020_wJJ69jjW
	printf 'granule1\tcollection1\n' | backfill granule-id --hash-length 6 -
	  granule1_kKuTyw	granule1	collection1
	backfill granule-id --payload payload.json --config '{"hashLength": 6}'
	backfill granule-id --risk --ingests 10000

EXIT STATUS

	0    success
	1    failure (e.g. unreadable file, standard output closed)
	2    usage error (including a hash length outside 1..22)
	3    some IDs, lines or the payload were rejected
	130  interrupted
`

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

func runGranuleID(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("granule-id", granuleHelp, std)
	var c granuleConfig
	fs.StringVar(&c.collectionID, "collection-id", "", "collection `ID`")
	fs.IntVar(&c.hashLength, "hash-length", granule.DefaultHashLength, "suffix length `N`")
	fs.BoolVar(&c.includeTimestamp, "include-timestamp", false, "hash a timestamp too")
	fs.StringVar(&c.payload, "payload", "", "AddUniqueGranuleId payload `FILE`")
	fs.StringVar(&c.config, "config", "", "task config `FILE` or JSON")
	fs.BoolVar(&c.risk, "risk", false, "print collision probabilities")
	fs.BoolVar(&c.simulate, "simulate", false, "measure collisions with real IDs")
	fs.Float64Var(&c.ingests, "ingests", 10000, "same-ID ingests `N`")
	fs.IntVar(&c.trials, "trials", 10000, "simulation runs `N`")
	fs.Uint64Var(&c.seed, "seed", 1, "simulation seed `N`")
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
			fmt.Fprintf(std.Err, "backfill: ID %q: %v\n", id, err)
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
	bad, err := gen.Stream(ctx, std.In, std.Out, defaultCollection, hasDefault, func(n int, why string) {
		fmt.Fprintf(std.Err, "backfill: line %d: %s\n", n, why)
	})
	if err != nil {
		return err
	}
	if bad > 0 {
		return &cli.RejectsError{N: bad, What: "lines"}
	}
	return nil
}

func granulePayload(c granuleConfig, std cli.Stdio) error {
	var cfg granule.TaskConfig
	if c.config != "" {
		raw := []byte(c.config)
		if !strings.HasPrefix(strings.TrimSpace(c.config), "{") {
			b, err := os.ReadFile(c.config)
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
		payload, err = os.ReadFile(c.payload)
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
			fmt.Fprintf(std.Err, "backfill: payload %s: %v\n", c.payload, p)
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
