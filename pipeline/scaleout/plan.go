// The plan: the buckets of an input split into shards balanced by bytes,
// for runs on several machines (Kubernetes Indexed Jobs), each shard the
// buckets one process stamps.
//
// A plan is a versioned, checksummed JSON document. It is deterministic for
// a given listing (whatever order the listing came in), and stable: a
// bucket's shard is decided by rendezvous hashing of its name, so adding a
// day moves few of the others. It records each bucket's listing
// fingerprint, so a shard refuses to run on an input that changed since
// planning.

package scaleout

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
)

// PlanVersion is the version of the plan format this package writes and reads.
const PlanVersion = 1

// Slack is how far above the mean a shard's bytes may go before a bucket
// is placed on a shard further down its ranking.
const Slack = 0.05

// Bucket is one bucket of a plan.
type Bucket struct {
	Name        string `json:"bucket"`
	Bytes       int64  `json:"bytes"`
	Fingerprint string `json:"listing_fingerprint"`
	Shard       int    `json:"shard"`
}

// Plan is the split of an input's buckets into shards.
type Plan struct {
	Version int      `json:"version"`
	Input   string   `json:"input"`
	Shards  int      `json:"shards"`
	Buckets []Bucket `json:"buckets"` // by name
	// InputRecords are the dead-letter records of the input's folders that
	// are not buckets (ingest.Input.Records): check counts them, once.
	InputRecords []deadletter.Record `json:"input_dead_letters,omitempty"`
	Checksum     string              `json:"checksum"`
}

// MaxShards bounds a plan's shards: a Kubernetes Indexed Job runs at most
// 100,000 completions, and a shard holds one bucket at least.
const MaxShards = 100_000

// NewPlan plans buckets (names, bytes and fingerprints; Shard is set here) of
// input into shards.
func NewPlan(input string, buckets []Bucket, shards int) (Plan, error) {
	if shards < 1 || shards > MaxShards {
		return Plan{}, fmt.Errorf("plan: %d shards; want 1 to %d", shards, MaxShards)
	}
	if err := checkInput(input); err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	bs := slices.Clone(buckets)
	slices.SortFunc(bs, func(a, b Bucket) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(bs); i++ {
		if bs[i].Name == bs[i-1].Name {
			return Plan{}, fmt.Errorf("plan: bucket %s is listed twice", bs[i].Name)
		}
	}
	assign(bs, shards)
	return Plan{Version: PlanVersion, Input: input, Shards: shards, Buckets: bs}, nil
}

// assign places each bucket, in name order, on the first shard of its
// rendezvous ranking whose bytes stay within (1+Slack) times the mean
// shard; when none has room, on the shard with the fewest bytes. So no
// shard ends above max((1+Slack)·mean, mean + the largest bucket).
func assign(bs []Bucket, shards int) {
	var total int64
	for _, b := range bs {
		total += b.Bytes
	}
	limit := int64(float64(total) / float64(shards) * (1 + Slack))
	load := make([]int64, shards)
	rank := make([]int, shards)
	scores := make([]uint64, shards)
	for i := range bs {
		b := &bs[i]
		for s := range rank {
			rank[s], scores[s] = s, score(b.Name, s)
		}
		slices.SortFunc(rank, func(x, y int) int {
			switch {
			case scores[x] > scores[y]:
				return -1
			case scores[x] < scores[y]:
				return 1
			}
			return x - y
		})
		b.Shard = -1
		for _, s := range rank {
			if load[s]+b.Bytes <= limit {
				b.Shard = s
				break
			}
		}
		if b.Shard < 0 {
			b.Shard = slices.Index(load, slices.Min(load))
		}
		load[b.Shard] += b.Bytes
	}
}

// score is the rendezvous weight of bucket on shard.
func score(bucket string, shard int) uint64 {
	h := sha256.Sum256([]byte(bucket + "\x00" + strconv.Itoa(shard)))
	return binary.BigEndian.Uint64(h[:8])
}

// checkInput checks that a plan's input is a location every shard finds
// wherever it runs: an absolute path or an s3:// URL.
func checkInput(input string) error {
	if strings.HasPrefix(input, "s3://") || path.IsAbs(input) {
		return nil
	}
	return fmt.Errorf("the input %q is a relative path: a plan holds an absolute path or an s3:// URL, so that a shard run from any folder finds it", input)
}

// Names returns the buckets of shard i, in name order.
func (p Plan) Names(i int) []string {
	var out []string
	for _, b := range p.Buckets {
		if b.Shard == i {
			out = append(out, b.Name)
		}
	}
	return out
}

// Loads returns the bytes of each shard.
func (p Plan) Loads() []int64 {
	out := make([]int64, p.Shards)
	for _, b := range p.Buckets {
		out[b.Shard] += b.Bytes
	}
	return out
}

// sum is the checksum of everything in p but the checksum.
func (p Plan) sum() string {
	p.Checksum = ""
	b, _ := json.Marshal(p)
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Marshal writes p as indented JSON, its checksum set.
func (p Plan) Marshal() []byte {
	p.Checksum = p.sum()
	b, _ := json.MarshalIndent(p, "", "  ")
	return append(b, '\n')
}

// ParsePlan reads a plan that Marshal wrote, and checks its version, its
// checksum and its consistency.
func ParsePlan(data []byte) (Plan, error) {
	var p Plan
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Plan{}, fmt.Errorf("not a plan: %w", err)
	}
	switch {
	case p.Version != PlanVersion:
		return Plan{}, fmt.Errorf("a plan of version %d; this backfill reads version %d", p.Version, PlanVersion)
	case p.Checksum != p.sum():
		return Plan{}, errors.New("the plan's checksum does not match its content: it was changed after it was written")
	case p.Shards < 1 || p.Shards > MaxShards:
		return Plan{}, fmt.Errorf("a plan of %d shards; a plan has 1 to %d", p.Shards, MaxShards)
	}
	if err := checkInput(p.Input); err != nil {
		return Plan{}, err
	}
	for i, b := range p.Buckets {
		if b.Shard < 0 || b.Shard >= p.Shards || (i > 0 && b.Name <= p.Buckets[i-1].Name) {
			return Plan{}, fmt.Errorf("the plan's bucket %s is out of order or of no shard", b.Name)
		}
	}
	return p, nil
}

// Shard returns shard, or when it is negative the shard of a Kubernetes
// Indexed Job's pod: JOB_COMPLETION_INDEX, as lookup (os.LookupEnv) reads
// it. The Job's JOB_COMPLETION_COUNT, when set, must be the plan's shards.
func (p Plan) Shard(shard int, lookup func(string) (string, bool)) (int, error) {
	if shard < 0 {
		idx, ok := lookup("JOB_COMPLETION_INDEX")
		if !ok {
			return 0, errors.New("--plan needs --shard, or JOB_COMPLETION_INDEX in the environment")
		}
		var err error
		if shard, err = strconv.Atoi(idx); err != nil {
			return 0, fmt.Errorf("JOB_COMPLETION_INDEX=%q is not a shard number", idx)
		}
	}
	if n, ok := lookup("JOB_COMPLETION_COUNT"); ok && n != strconv.Itoa(p.Shards) {
		return 0, fmt.Errorf("the plan has %d shards and JOB_COMPLETION_COUNT is %s: the Job's completions must be the plan's shards", p.Shards, n)
	}
	if shard < 0 || shard >= p.Shards {
		return 0, fmt.Errorf("shard %d is not one of the plan's 0..%d", shard, p.Shards-1)
	}
	return shard, nil
}
