package aws_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/rpdhq/rpd/backend/aws"
)

// Open makes no call to AWS; the tables are created by EnsureTables (apply)
// and planned from TableStatus.
func ExampleOpen() {
	b, err := aws.Open(context.Background(), aws.Options{
		Stack:       "ci-prod",
		Region:      "eu-west-1",
		TablePrefix: "rpd-ci-prod",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.Stack(), b.Queue("ci-prod-rp-medium").Name())
	// Output:
	// ci-prod ci-prod-rp-medium
}
