package awstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/rpdhq/rpd/backend/aws"
)

// Region and static credentials the emulators accept.
const (
	Region    = "us-east-1"
	AccessKey = "test"
	SecretKey = "test"
)

// startTimeout bounds how long Start waits for an emulator to answer.
const startTimeout = 20 * time.Second

// Endpoints are the base URLs of running emulators.
type Endpoints struct {
	SQS      string // http://127.0.0.1:<port>
	DynamoDB string // http://127.0.0.1:<port>
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

	sqsPort, ddbPort := freePort(t), freePort(t)
	sqsScript := fmt.Sprintf(`require(%q).createSqsServer({port: %d, hostname: "127.0.0.1", emulateQueueCreationLifecycle: false}).catch(e => { console.error(e); process.exit(1) })`,
		filepath.Join(dir, "node_modules", "local-aws-sqs"), sqsPort)
	e := Endpoints{
		SQS:      fmt.Sprintf("http://127.0.0.1:%d", sqsPort),
		DynamoDB: fmt.Sprintf("http://127.0.0.1:%d", ddbPort),
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range []struct {
		name, url string
		argv      []string
	}{
		{"local-aws-sqs", e.SQS, []string{node, "-e", sqsScript}},
		// Short create/delete delays keep EnsureTables fast.
		{"dynalite", e.DynamoDB, []string{node, filepath.Join(dir, "node_modules", "dynalite", "cli.js"), "--port", fmt.Sprint(ddbPort), "--host", "127.0.0.1", "--createTableMs", "10", "--deleteTableMs", "10", "--updateTableMs", "10"}},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = start(t, p.name, p.url, p.argv)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("awstest: %v", err)
	}
	return e
}

// start runs one emulator in its own process group and waits until it
// answers HTTP at url.
func start(t testing.TB, name, url string, argv []string) error {
	var stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			t.Logf("awstest: %s (pid %d) did not exit within 5s of SIGKILL", name, cmd.Process.Pid)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before answering on %s: %s", name, url, strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer on %s within %v: %s", name, url, startTimeout, strings.TrimSpace(stderr.String()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePort returns a 127.0.0.1 port that was free a moment ago.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("awstest: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
