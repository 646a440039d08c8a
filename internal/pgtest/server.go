package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a throwaway PostgreSQL cluster of the test's own, made with the
// local binaries, so that a test may stop and restart it.
type Server struct {
	t     testing.TB
	bin   string
	dir   string
	port  int
	runAs []string
}

// BinDir finds the PostgreSQL server binaries (initdb, pg_ctl).
func BinDir() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	ds, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(ds) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(ds[i], "initdb")); err == nil {
			return ds[i], nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl) found; install them (Debian: apt-get install postgresql)")
}

// StartServer makes and starts a cluster that is stopped and removed when
// the test ends. The binaries must be installed: a missing one fails the
// test.
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "backfill-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, dir: dir}
	if os.Geteuid() == 0 { // initdb refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user to own the cluster: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		if err := os.Chown(dir, uid, -1); err != nil {
			t.Fatal(err)
		}
		s.runAs = []string{"runuser", "-u", "postgres", "--"}
		if err := searchable(dir); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = s.pgctl("-m", "immediate", "stop") // a server already gone is stopped
		_ = os.RemoveAll(dir)                  // in the test's temporary folder
	})
	if out, err := s.cmd(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close() // only a free port was wanted
	s.Start()
	return s
}

// searchable lets the server's user reach dir: a private TMPDIR (mktemp -d
// makes them 0700) above it gets search permission for others, nothing
// more, on the folders this process owns.
func searchable(dir string) error {
	for p := filepath.Dir(dir); p != filepath.Dir(p); p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 != 0 {
			continue
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok || int(sys.Uid) != os.Geteuid() {
			continue
		}
		if err := os.Chmod(p, st.Mode().Perm()|0o001); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) cmd(name string, args ...string) *exec.Cmd {
	if len(s.runAs) > 0 {
		return exec.Command(s.runAs[0], append(append(s.runAs[1:], name), args...)...)
	}
	return exec.Command(name, args...)
}

func (s *Server) pgctl(args ...string) error {
	args = append([]string{"-D", s.data(), "-l", filepath.Join(s.dir, "server.log")}, args...)
	out, err := s.cmd(filepath.Join(s.bin, "pg_ctl"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Start starts the stopped server and waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", s.port, s.dir)
	if err := s.pgctl("-w", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		s.t.Fatalf("%v\n%s", err, log)
	}
}

// Stop stops the server at once, as a crash would.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.pgctl("-w", "-m", "immediate", "stop"); err != nil {
		s.t.Fatal(err)
	}
}

// URL is the URL of the server's postgres database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// postmaster is the server's main process id, from its pid file.
func (s *Server) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// processes lists the server's processes: the postmaster and its children.
func (s *Server) processes() ([]int, error) {
	pm, err := s.postmaster()
	if err != nil {
		return nil, err
	}
	pids := []int{pm}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := procStat(pid); ok && f.ppid == int64(pm) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Pin binds the server's processes, and so the sessions it starts later,
// to cpus (as taskset takes them: "0", "0-1").
func (s *Server) Pin(cpus string) {
	s.t.Helper()
	pids, err := s.processes()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, pid := range pids {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput(); err != nil {
			s.t.Fatalf("taskset: %v\n%s", err, out)
		}
	}
}

// CPU is the processor time the server has spent so far: its processes'
// own, and that of the sessions that ended (the postmaster's children's).
func (s *Server) CPU() time.Duration {
	s.t.Helper()
	pids, err := s.processes()
	if err != nil {
		s.t.Fatal(err)
	}
	var ticks int64
	for i, pid := range pids {
		f, ok := procStat(pid)
		if !ok {
			continue // a session that ended meanwhile: the postmaster counts it
		}
		ticks += f.utime + f.stime
		if i == 0 {
			ticks += f.cutime + f.cstime
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

type statFields struct{ ppid, utime, stime, cutime, cstime int64 }

// procStat reads the fields of /proc/PID/stat that CPU and processes use.
func procStat(pid int) (statFields, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return statFields{}, false
	}
	// The command, in parentheses, may hold spaces: the fields follow
	// its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return statFields{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return statFields{}, false
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	return statFields{ppid: n(1), utime: n(11), stime: n(12), cutime: n(13), cstime: n(14)}, true
}

// Log is what the server has written to its log so far.
func (s *Server) Log() string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}
