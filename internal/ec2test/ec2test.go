package ec2test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/rpdhq/rpd/internal/childproc"
)

// Region and static credentials moto accepts (any will do).
const (
	Region    = "us-east-1"
	AccessKey = "fleet"
	SecretKey = "fleet"
	// AMI is an image ID moto knows.
	AMI = "ami-12c6146b"
)

// startTimeout bounds how long Start waits for moto_server to answer.
const startTimeout = 30 * time.Second

// Credentials are the static credentials for moto.
func Credentials() awssdk.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")
}

// Env returns the environment that points the SDK's configuration chain
// (of a child rpd process) at endpoint.
func Env(endpoint string) []string {
	return []string{
		"AWS_ENDPOINT_URL_EC2=" + endpoint, "AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey,
	}
}

// command finds moto_server: on PATH, or as python3's moto.server module.
func command() ([]string, error) {
	if p, err := exec.LookPath("moto_server"); err == nil {
		return []string{p}, nil
	}
	if py, err := exec.LookPath("python3"); err == nil {
		if exec.Command(py, "-c", "import moto.server").Run() == nil {
			return []string{py, "-m", "moto.server"}, nil
		}
	}
	return nil, errors.New("moto_server is not on PATH and python3 cannot import moto.server; install moto with its server extra (pip install 'moto[server]')")
}

// Start starts moto_server on a free 127.0.0.1 port for t, waits until it
// answers EC2 calls, and kills it (its process group) in t.Cleanup. It
// returns the endpoint URL (http://127.0.0.1:PORT). When moto is missing
// it skips t, or fails it when the environment variable CI is set.
func Start(t testing.TB) string {
	t.Helper()
	argv, err := command()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("ec2test: %v (CI is set, so the EC2 tests must not be skipped)", err)
		}
		t.Skipf("ec2test: skipping the EC2 tests: %v", err)
	}
	var last error
	for range 3 { // a port picked here may be taken before moto binds it
		url, err := start(t, argv)
		if err == nil {
			return url
		}
		last = err
	}
	t.Fatalf("ec2test: %v", last)
	return ""
}

func start(t testing.TB, argv []string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	out := &syncBuffer{}
	cmd := exec.Command(argv[0], append(argv[1:], "-H", "127.0.0.1", "-p", fmt.Sprint(port))...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childproc.Attr()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start moto_server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	kill := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(startTimeout)
	c := Client(url)
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		select {
		case <-exited:
			return "", fmt.Errorf("moto_server exited before answering: %s", out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.DescribeRegions(ctx, &ec2.DescribeRegionsInput{})
		cancel()
		if err == nil {
			t.Cleanup(kill)
			return url, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	kill()
	return "", fmt.Errorf("moto_server did not answer within %v: %s", startTimeout, out.String())
}

// syncBuffer keeps the first 64 KiB of moto's output, for errors.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 64<<10 {
		w.b.Write(p)
	}
	return len(p), nil
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Client returns an EC2 client of endpoint, with moto's credentials and a
// short retry budget.
func Client(endpoint string) *ec2.Client {
	return ec2.New(ec2.Options{
		Region: Region, Credentials: Credentials(), BaseEndpoint: awssdk.String(endpoint),
		RetryMaxAttempts: 2, HTTPClient: &http.Client{Timeout: 10 * time.Second},
	})
}

// CreateLaunchTemplate creates a launch template named name whose VMs are
// c6i.large on moto's AMI.
func CreateLaunchTemplate(t testing.TB, endpoint, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Client(endpoint).CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: awssdk.String(name),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: awssdk.String(AMI), InstanceType: types.InstanceTypeC6iLarge},
	})
	if err != nil {
		t.Fatalf("ec2test: create launch template %s: %v", name, err)
	}
}

// Live returns the IDs of the pending and running instances tagged
// rpd:stack=stack (and with tags, when given), with their tags.
func Live(t testing.TB, endpoint, stack string, tags map[string]string) map[string]map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	filters := []types.Filter{
		{Name: awssdk.String("tag:rpd:stack"), Values: []string{stack}},
		{Name: awssdk.String("instance-state-name"), Values: []string{"pending", "running"}},
	}
	for k, v := range tags {
		filters = append(filters, types.Filter{Name: awssdk.String("tag:" + k), Values: []string{v}})
	}
	out := map[string]map[string]string{}
	p := ec2.NewDescribeInstancesPaginator(Client(endpoint), &ec2.DescribeInstancesInput{Filters: filters})
	for pages := 0; p.HasMorePages() && pages < 1000; pages++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("ec2test: DescribeInstances: %v", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				m := map[string]string{}
				for _, tg := range i.Tags {
					m[awssdk.ToString(tg.Key)] = awssdk.ToString(tg.Value)
				}
				out[awssdk.ToString(i.InstanceId)] = m
			}
		}
	}
	return out
}

// RunOrphan starts one instance tagged with the stack (and class, when
// not empty) that rpd did not launch, and returns its ID.
func RunOrphan(t testing.TB, endpoint, stack, class string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tags := []types.Tag{{Key: awssdk.String("rpd:stack"), Value: awssdk.String(stack)}}
	if class != "" {
		tags = append(tags, types.Tag{Key: awssdk.String("rpd:class"), Value: awssdk.String(class)})
	}
	out, err := Client(endpoint).RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId: awssdk.String(AMI), InstanceType: types.InstanceTypeC6iLarge, MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: tags}},
	})
	if err != nil {
		t.Fatalf("ec2test: RunInstances: %v", err)
	}
	return awssdk.ToString(out.Instances[0].InstanceId)
}
