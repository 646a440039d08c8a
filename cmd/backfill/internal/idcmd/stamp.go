package idcmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/backfill-dev/backfill/collector"
	"github.com/backfill-dev/backfill/docs"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/lines"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/units"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// stampOptions are stamp's flags.
type stampOptions struct {
	opt               collector.Options
	id                int
	count             int64
	listen, rejects   string
	tokenFile         string
	maxClients        int
	httpTimeout       time.Duration
	lease, lead       uint
	offset            time.Duration
	maxLine           units.Size
	counting          bool // --count was given
	idSet, maxLineSet bool
	rest              []string
}

func parseStampFlags(args []string, std cli.Stdio) (*stampOptions, error) {
	fs := cli.NewFlagSet("stamp", docs.Help("stamp"), std)
	o := &stampOptions{maxLine: units.Size(64 << 20)}
	fs.IntVar(&o.id, "collector-id", 0, "this collector's id `N`, 0..239 (0x00..0xEF) (required)")
	fs.StringVar(&o.opt.State, "state", "", "the state `FILE` (required; created for a new collector)")
	fs.Int64Var(&o.count, "count", 0, "print `N` IDs and exit")
	fs.StringVar(&o.listen, "listen", "", "serve IDs over HTTP on `ADDR` (host:port)")
	fs.IntVar(&o.maxClients, "max-clients", collector.DefaultMaxClients, "with --listen: `N` connections at once, 1..4096; one more is closed at once")
	fs.StringVar(&o.tokenFile, "token-file", "", "with --listen: a `FILE` holding the token every request must carry (Authorization: Bearer TOKEN); or set BACKFILL_STAMP_TOKEN")
	fs.DurationVar(&o.httpTimeout, "http-timeout", 30*time.Second, "with --listen: the time `D` a client has to send its request, and to read the answer")
	fs.UintVar(&o.lease, "lease", collector.DefaultLease, "`N` seconds reserved by each durable mark")
	fs.UintVar(&o.lead, "max-lead", collector.DefaultMaxLead, "`N` seconds the IDs may run ahead of the clock")
	fs.BoolVar(&o.opt.FailAhead, "fail-ahead", false, "fail instead of waiting past --max-lead")
	fs.DurationVar(&o.opt.MaxWait, "max-wait", collector.DefaultMaxWait, "the longest wait `D` for the clock past --max-lead; a longer one fails at once, naming the clock")
	fs.DurationVar(&o.offset, "clock-offset", 0, "shift the clock by `D`, for tests of clock steps")
	fs.StringVar(&o.rejects, "rejects", "", "append the lines rejected by the filter to `FILE`")
	fs.Var(&o.maxLine, "max-line", "reject lines over `SIZE` bytes")
	var err error
	if o.rest, err = cli.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	o.counting = len(cli.SetFlags(fs, "count")) > 0
	o.idSet = len(cli.SetFlags(fs, "collector-id")) > 0
	o.maxLineSet = len(cli.SetFlags(fs, "max-line")) > 0
	return o, nil
}

// check checks the flags and completes the collector's options.
func (o *stampOptions) check() error {
	switch {
	case len(o.rest) > 0:
		return cli.Usagef("stamp: unexpected argument %q", o.rest[0])
	case !o.idSet:
		return cli.Usagef("stamp: --collector-id is required")
	case o.id < 0 || o.id > ooid.MaxCollectorID:
		return cli.Usagef("stamp: --collector-id must be 0..%d (0xf0..0xff would alias backfilled IDs)", ooid.MaxCollectorID)
	case o.opt.State == "":
		return cli.Usagef("stamp: --state is required")
	case o.counting && o.count < 0:
		return cli.Usagef("stamp: --count must be 0 or more")
	case o.counting && o.listen != "":
		return cli.Usagef("stamp: --count and --listen cannot be used together")
	case o.lease == 0 || o.lead < o.lease || o.lead > 1<<20:
		return cli.Usagef("stamp: --lease must be positive and --max-lead at least --lease")
	case (o.rejects != "" || o.maxLineSet) && (o.counting || o.listen != ""):
		return cli.Usagef("stamp: --rejects and --max-line are for the filter, not --count or --listen")
	case o.maxLine < 2 || o.maxLine > 1<<30:
		return cli.Usagef("stamp: --max-line must be 2 bytes to 1GiB")
	case o.httpTimeout <= 0:
		return cli.Usagef("stamp: --http-timeout must be positive")
	case o.maxClients < 1 || o.maxClients > 4096:
		return cli.Usagef("stamp: --max-clients must be 1 to 4096")
	case o.tokenFile != "" && o.listen == "":
		return cli.Usagef("stamp: --token-file is for --listen")
	case o.opt.MaxWait <= 0:
		return cli.Usagef("stamp: --max-wait must be positive")
	}
	o.opt.CollectorID, o.opt.Lease, o.opt.MaxLead = uint8(o.id), uint32(o.lease), uint32(o.lead)
	if offset := o.offset; offset != 0 {
		o.opt.Clock = func() time.Time { return time.Now().Add(offset) }
	}
	return nil
}

func RunStamp(ctx context.Context, args []string, std cli.Stdio) (err error) {
	o, err := parseStampFlags(args, std)
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	o.opt.Notice = func(msg string) { fmt.Fprintf(std.Err, "backfill: %s\n", msg) }
	s, err := collector.Open(o.opt)
	if err != nil {
		return err
	}
	defer cli.CloseAlso(&err, s)
	switch {
	case o.counting:
		return s.WriteIDs(ctx, o.count, std.Out)
	case o.listen != "":
		token, err := stampToken(o.tokenFile)
		if err != nil {
			return err
		}
		err = s.Serve(ctx, o.listen, collector.ServeOptions{Timeout: o.httpTimeout, MaxClients: o.maxClients, Token: token}, func(a net.Addr) {
			fmt.Fprintf(std.Err, "backfill: stamp: serving IDs on http://%s/ids\n", a)
			if token == "" && !collector.Loopback(a) {
				fmt.Fprintf(std.Err, "backfill: stamp: warning: %s is reachable beyond this machine and no token is asked: whoever reaches it can spend IDs; give --token-file or set %s\n", a, tokenEnv)
			}
		})
		if err == nil {
			fmt.Fprintln(std.Err, "backfill: stamp: stopped")
		}
		return err
	case o.rejects != "":
		return stampFilterRejects(ctx, s, o.rejects, int(o.maxLine), std)
	}
	return stampFilter(ctx, s, lines.NewReaderLimit(std.In, int(o.maxLine), nil), nil, std)
}

// stampFilterRejects runs the filter with the lines it rejects appended
// to the file rejects.
func stampFilterRejects(ctx context.Context, s *collector.Stamper, rejects string, maxLine int, std cli.Stdio) error {
	// Not through a link (ELOOP), nor into a FIFO or a device.
	f, err := os.OpenFile(rejects, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("stamp: --rejects %s is a link: the rejected lines are not written through it", rejects)
	}
	if err != nil {
		return err
	}
	if f, err = store.Regular(f, rejects, false); err != nil {
		return fmt.Errorf("stamp: --rejects: %w", err)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	err = stampFilter(ctx, s, lines.NewReaderLimit(std.In, maxLine, bw), bw, std)
	if ferr := bw.Flush(); ferr != nil && err == nil {
		err = fmt.Errorf("write %s: %w", rejects, ferr)
	}
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("write %s: %w", rejects, cerr)
	}
	return err
}

// stampFilter stamps the JSON lines of lr, saying each line it rejects.
func stampFilter(ctx context.Context, s *collector.Stamper, lr *lines.Reader, dead io.Writer, std cli.Stdio) error {
	return cli.FilterLines(std, func(bad func(int, string)) (int, error) {
		return s.Filter(ctx, lr, std.Out, dead, bad)
	})
}

// tokenEnv is the variable that gives stamp --listen its token, as
// --token-file does (never a flag's value, which other users see).
const tokenEnv = "BACKFILL_STAMP_TOKEN"

// stampToken reads the token of --listen: from file, else from tokenEnv;
// "" when neither gives one.
func stampToken(file string) (string, error) {
	env, envSet := os.LookupEnv(tokenEnv)
	switch {
	case file != "" && envSet:
		return "", cli.Usagef("stamp: --token-file and %s both give a token: give one", tokenEnv)
	case file != "":
		f, err := store.OpenRegular(file)
		if err != nil {
			return "", fmt.Errorf("stamp: --token-file: %w", err)
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return "", fmt.Errorf("stamp: --token-file: %w", err)
		}
		if info.Mode().Perm()&0o022 != 0 {
			return "", cli.Usagef("stamp: --token-file %s can be written by others (mode %04o): anyone who can change it can let themselves in; chmod go-w it", file, info.Mode().Perm())
		}
		b, err := io.ReadAll(io.LimitReader(f, 64<<10))
		if err != nil {
			return "", fmt.Errorf("stamp: --token-file: %w", err)
		}
		// The token is the file's first line; what follows it is not read.
		line, _, _ := strings.Cut(string(b), "\n")
		t := strings.TrimRight(line, "\r")
		if t == "" || strings.ContainsAny(t, " \t\r") || !utf8.ValidString(t) {
			return "", cli.Usagef("stamp: --token-file %s: its first line must be the token, without spaces", file)
		}
		return t, nil
	case envSet && env == "":
		return "", cli.Usagef("stamp: %s is set but empty", tokenEnv)
	}
	return env, nil
}
