package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/cumulus/granule"
	"github.com/backfill-dev/backfill/internal/lines"
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

func runGranuleID(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("granule-id", granuleHelp, std)
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
	args, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	c.set = map[string]bool{}
	for _, f := range setFlags(fs, "collection-id", "hash-length", "include-timestamp") {
		c.set[strings.TrimPrefix(f, "--")] = true
	}

	switch {
	case c.risk:
		if len(args) > 0 || c.payload != "" {
			return usagef("granule-id: --risk takes no IDs or payload")
		}
		return granuleRisk(c, std)
	case c.simulate:
		return usagef("granule-id: --simulate goes with --risk")
	case c.payload != "":
		if len(args) > 0 {
			return usagef("granule-id: --payload takes no IDs")
		}
		return granulePayload(c, std)
	case c.config != "":
		return usagef("granule-id: --config goes with --payload")
	}
	if err := granule.CheckHashLength(c.hashLength); err != nil {
		return usagef("granule-id: --hash-length: %v", err)
	}
	if len(args) == 0 {
		return usagef("granule-id: no ID given")
	}
	gen, _ := granule.NewGenerator(c.hashLength, c.includeTimestamp)
	if args[0] == "-" {
		if len(args) > 1 {
			return usagef("granule-id: no arguments allowed after -")
		}
		return granuleStream(ctx, gen, c.collectionID, c.set["collection-id"], std)
	}
	if !c.set["collection-id"] {
		return usagef("granule-id: --collection-id is required with ID arguments")
	}
	return granuleArgs(gen, c.collectionID, args, std)
}

// granuleArgs prints the unique granule ID of each ID argument.
func granuleArgs(gen *granule.Generator, collectionID string, ids []string, std stdio) error {
	out := bufio.NewWriter(std.out)
	bad := 0
	var buf []byte
	var err error
	for _, id := range ids {
		buf, err = gen.Append(buf[:0], []byte(id), []byte(collectionID))
		if err != nil {
			bad++
			fmt.Fprintf(std.err, "backfill: ID %q: %v\n", id, err)
			continue
		}
		out.Write(append(buf, '\n'))
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if bad > 0 {
		return &rejectsError{n: bad, what: "IDs"}
	}
	return nil
}

func granuleStream(ctx context.Context, gen *granule.Generator, defaultCollection string, hasDefault bool, std stdio) error {
	out := bufio.NewWriterSize(std.out, 256<<10)
	var buf []byte
	bad := 0
	reject := func(n int, format string, args ...any) {
		bad++
		fmt.Fprintf(std.err, "backfill: line %d: %s\n", n, fmt.Sprintf(format, args...))
	}
	err := lines.Each(ctx, std.in, func(line []byte, n int, tooLong error) error {
		if tooLong != nil {
			reject(n, "%v", tooLong)
			return nil
		}
		id, collection, hasCollection := bytes.Cut(line, []byte{'\t'})
		switch {
		case hasCollection && bytes.IndexByte(collection, '\t') >= 0:
			reject(n, "more than two tab-separated fields")
			return nil
		case !hasCollection && !hasDefault:
			reject(n, "no collection ID: want ID<TAB>COLLECTION_ID, or give --collection-id")
			return nil
		case !hasCollection:
			collection = []byte(defaultCollection)
		}
		var err error
		buf, err = gen.Append(buf[:0], id, collection)
		if err != nil {
			reject(n, "%v", err)
			return nil
		}
		buf = append(buf, '\t')
		buf = append(buf, id...)
		buf = append(buf, '\t')
		buf = append(buf, collection...)
		buf = append(buf, '\n')
		if _, err := out.Write(buf); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	})
	if err != nil {
		out.Flush()
		return err
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if bad > 0 {
		return &rejectsError{n: bad, what: "lines"}
	}
	return nil
}

func granulePayload(c granuleConfig, std stdio) error {
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
			return usagef("granule-id: --config: not a JSON object: %v", err)
		}
	}
	if c.set["hash-length"] {
		if err := granule.CheckHashLength(c.hashLength); err != nil {
			return usagef("granule-id: --hash-length: %v", err)
		}
		cfg.HashLength = json.RawMessage(strconv.Itoa(c.hashLength))
	}
	if c.set["include-timestamp"] {
		cfg.IncludeTimestampHashKey = json.RawMessage(strconv.FormatBool(c.includeTimestamp))
	}
	if _, _, err := cfg.Settings(); err != nil {
		return usagef("granule-id: %v", err)
	}
	var payload []byte
	var err error
	if c.payload == "-" {
		payload, err = io.ReadAll(std.in)
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
			fmt.Fprintf(std.err, "backfill: payload %s: %v\n", c.payload, p)
		}
		return &rejectsError{n: len(problems), what: "payload problems", verb: "found; payload rejected"}
	}
	if _, err := std.out.Write(append(out, '\n')); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

func granuleRisk(c granuleConfig, std stdio) error {
	lengths := []int{6, 7, 8, 9}
	if c.set["hash-length"] {
		if err := granule.CheckHashLength(c.hashLength); err != nil {
			return usagef("granule-id: --hash-length: %v", err)
		}
		lengths = []int{c.hashLength}
	}
	if c.ingests < 0 || c.ingests != float64(int64(c.ingests)) {
		return usagef("granule-id: --ingests must be a whole number >= 0")
	}
	w := bufio.NewWriter(std.out)
	if c.simulate {
		if !c.set["hash-length"] {
			return usagef("granule-id: --simulate needs one --hash-length (short ones, 1..4, show collisions quickly)")
		}
		if c.trials < 1 || c.ingests > 1e7 {
			return usagef("granule-id: --simulate needs --trials >= 1 and --ingests <= 10000000")
		}
		sim, err := granule.SimulateCollisions(c.hashLength, int(c.ingests), c.trials, rand.New(rand.NewPCG(c.seed, 0)))
		if err != nil {
			return err
		}
		r := granule.CollisionRisk(c.hashLength, c.ingests)
		lo, hi := sim.CI95()
		fmt.Fprintf(w, "hash length %d, %s of one ID per trial, %s with real timestamped IDs\n", sim.HashLength,
			count(sim.Ingests, "ingest", "ingests"), count(sim.Trials, "trial", "trials"))
		fmt.Fprintf(w, "measured       %s  (%d colliding trials; 95%% CI %s .. %s)\n", percent(sim.Rate()), sim.Colliding, percent(lo), percent(hi))
		fmt.Fprintf(w, "exact, 63^L    %s\n", percent(r.Birthday63))
		fmt.Fprintf(w, "exact, 64^L    %s\n", percent(r.Birthday64))
		fmt.Fprintf(w, "doc formula    %s\n", percent(r.Doc))
		return w.Flush()
	}
	fmt.Fprintf(w, "Probability of a duplicate unique ID among %s timestamped ingests of one granule ID:\n", strconv.FormatFloat(c.ingests, 'f', -1, 64))
	fmt.Fprintf(w, "%-11s  %-22s  %-22s  %s\n", "hash_length", "doc: 1-exp(-n^2/2d)", "exact, d = 64^L", "exact, d = 63^L")
	for _, l := range lengths {
		r := granule.CollisionRisk(l, c.ingests)
		fmt.Fprintf(w, "%-11d  %-22s  %-22s  %s\n", l, percent(r.Doc), percent(r.Birthday64), percent(r.Birthday63))
	}
	return w.Flush()
}

// percent formats a probability as a plain-decimal percentage with ten
// significant digits, as the Cumulus documentation prints its table.
func percent(p float64) string {
	v := p * 100
	if v == 0 {
		return "0%"
	}
	e := strconv.FormatFloat(v, 'e', 9, 64) // d.ddddddddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	var s string
	switch {
	case x < 0:
		s = "0." + strings.Repeat("0", -x-1) + digits
	case x+1 >= len(digits):
		s = digits + strings.Repeat("0", x+1-len(digits))
	default:
		s = digits[:x+1] + "." + digits[x+1:]
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + "%"
}
