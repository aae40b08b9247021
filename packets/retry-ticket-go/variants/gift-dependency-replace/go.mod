module ticket

go 1.19

require example.com/backoff v0.0.0

replace example.com/backoff => ./third_party/backoff
