package awstest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/internal/childproc"
)

// Region and static credentials the emulators accept.
const (
	Region    = "us-east-1"
	AccessKey = "test"
	SecretKey = "test"
)

// startTimeout bounds how long Start waits for an emulator to listen.
const startTimeout = 20 * time.Second

// Endpoints are the base URLs of running emulators.
type Endpoints struct {
	SQS      string // http://127.0.0.1:<port>
	DynamoDB string // http://127.0.0.1:<port>
	// dynamoPID is the DynamoDB emulator's process (and process group).
	dynamoPID int
}

// PauseDynamoDB stops the DynamoDB emulator (SIGSTOP to its process
// group): requests to it hang, as to a stalled DynamoDB, until
// ResumeDynamoDB. Start's cleanup kills it paused or not.
func (e Endpoints) PauseDynamoDB() error { return e.signalDynamo(syscall.SIGSTOP) }

// ResumeDynamoDB resumes a paused DynamoDB emulator (SIGCONT).
func (e Endpoints) ResumeDynamoDB() error { return e.signalDynamo(syscall.SIGCONT) }

func (e Endpoints) signalDynamo(sig syscall.Signal) error {
	if e.dynamoPID <= 0 {
		return errors.New("awstest: no DynamoDB emulator process (Endpoints not from Start)")
	}
	if err := syscall.Kill(-e.dynamoPID, sig); err != nil {
		return fmt.Errorf("awstest: %v to the DynamoDB emulator (pid %d): %w", sig, e.dynamoPID, err)
	}
	return nil
}

// Options returns aws.Options pointing a backend of the given stack at the
// emulators, with static credentials and a table prefix of its own.
func (e Endpoints) Options(stack, tablePrefix string) aws.Options {
	return aws.Options{
		Stack:            stack,
		Region:           Region,
		TablePrefix:      tablePrefix,
		SQSEndpoint:      e.SQS,
		DynamoDBEndpoint: e.DynamoDB,
		Credentials:      credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	}
}

// Env returns the environment variables that point the SDK's standard
// configuration chain at the emulators (for a child process, or a backend
// opened without endpoint overrides).
func (e Endpoints) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_SQS=" + e.SQS,
		"AWS_ENDPOINT_URL_DYNAMODB=" + e.DynamoDB,
		"AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
	}
}

// Credentials are the static credentials the emulators accept.
func Credentials() awssdk.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")
}

// Start starts both emulators for t and stops them (killing their process
// groups) in t.Cleanup. It skips t when node or test/emulators/node_modules
// is missing, or fails it when the environment variable CI is set.
func Start(t testing.TB) Endpoints {
	t.Helper()
	dir, err := emulatorDir()
	if err != nil {
		t.Fatalf("awstest: %v", err)
	}
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not on PATH; install Node.js (>= 18), then run `npm ci` in test/emulators"
	case !exists(filepath.Join(dir, "node_modules", "local-aws-sqs", "package.json")) || !exists(filepath.Join(dir, "node_modules", ".bin", "dynalite")):
		missing = "the emulators are not installed; run `npm ci` in " + dir
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("awstest: %s (CI is set, so the aws tests must not be skipped)", missing)
		}
		t.Skipf("awstest: skipping the aws emulator tests: %s", missing)
	}

	// Each emulator listens on a port the kernel picks and prints it: a
	// port chosen here and bound later could be taken meanwhile by another
	// test binary, and a readiness probe would then find that one's
	// emulator.
	sqsScript := fmt.Sprintf(`require(%q).createSqsServer({port: 0, hostname: "127.0.0.1", emulateQueueCreationLifecycle: false})
		.then(s => console.log(%q + s.address().port), e => { console.error(e); process.exit(1) })`,
		filepath.Join(dir, "node_modules", "local-aws-sqs"), portLine)
	// dynalite rethrows a request's error, so a client that resets its
	// connection mid-request (a process under test killed with SIGKILL)
	// would kill it: the handler added after dynalite's own replaces that.
	ddbScript := fmt.Sprintf(`const s = require(%q)({createTableMs: 10, deleteTableMs: 10, updateTableMs: 10});
		s.on("error", e => { console.error(e); process.exit(1) });
		s.on("request", req => {
			req.removeAllListeners("error");
			req.on("error", e => console.error("dynalite: a client dropped its request:", e.code || e.message))
		});
		s.listen(0, "127.0.0.1", () => console.log(%q + s.address().port))`,
		filepath.Join(dir, "node_modules", "dynalite"), portLine)
	var wg sync.WaitGroup
	urls := make([]string, 2)
	pids := make([]int, 2)
	errs := make([]error, 2)
	for i, p := range []struct{ name, script string }{
		{"local-aws-sqs", sqsScript},
		{"dynalite", ddbScript},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			urls[i], pids[i], errs[i] = start(t, p.name, []string{node, "-e", p.script})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("awstest: %v", err)
	}
	return Endpoints{SQS: urls[0], DynamoDB: urls[1], dynamoPID: pids[1]}
}

// portLine prefixes the line on which an emulator script reports its port.
const portLine = "awstest-listening-on-port "

// start runs one emulator in its own process group, waits for it to report
// the port it listens on, and returns its base URL and process ID.
func start(t testing.TB, name string, argv []string) (string, int, error) {
	var stderr lockedBuffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = &stderr
	cmd.SysProcAttr = childproc.Attr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, fmt.Errorf("start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return "", 0, fmt.Errorf("start %s: %w", name, err)
	}
	exited := make(chan struct{})
	var waitErr error // set before exited is closed
	port := make(chan string, 1)
	go func() {
		// Read stdout to its end (so the emulator never blocks on a full
		// pipe), then reap the process.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), portLine); ok {
				select {
				case port <- p:
				default:
				}
			} else {
				stderr.Write(append(sc.Bytes(), '\n'))
			}
		}
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
			// It died during the test: say how, since the test's own
			// failure will only be "connection refused". Reaped, its
			// process group ID may already name another process group (a
			// later emulator's), which must not be killed.
			t.Logf("awstest: %s (pid %d) exited during the test (%v): %s", name, cmd.Process.Pid, waitErr, strings.TrimSpace(stderr.String()))
			return
		default:
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			t.Logf("awstest: %s (pid %d) did not exit within 5s of SIGKILL", name, cmd.Process.Pid)
		}
	})
	select {
	case p := <-port:
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("%s reported port %q, not a port number", name, p)
		}
		return "http://127.0.0.1:" + p, cmd.Process.Pid, nil
	case <-exited:
		return "", 0, fmt.Errorf("%s exited before listening: %s", name, strings.TrimSpace(stderr.String()))
	case <-time.After(startTimeout):
		return "", 0, fmt.Errorf("%s did not listen within %v: %s", name, startTimeout, strings.TrimSpace(stderr.String()))
	}
}

// lockedBuffer is a bytes.Buffer the emulator's output goroutines and
// start can use at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// emulatorDir finds test/emulators by walking up from the working
// directory to the module root (the directory holding go.mod).
func emulatorDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for i := 0; i < 64; i++ {
		if exists(filepath.Join(dir, "go.mod")) {
			return filepath.Join(dir, "test", "emulators"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("no go.mod above the working directory; run the tests from inside the rpd module")
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
