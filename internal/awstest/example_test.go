package awstest_test

import (
	"fmt"

	"github.com/rpdhq/rpd/internal/awstest"
)

func ExampleEndpoints_Env() {
	e := awstest.Endpoints{SQS: "http://127.0.0.1:4100", DynamoDB: "http://127.0.0.1:4101"}
	for _, kv := range e.Env()[:2] {
		fmt.Println(kv)
	}
	// Output:
	// AWS_ENDPOINT_URL_SQS=http://127.0.0.1:4100
	// AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:4101
}
