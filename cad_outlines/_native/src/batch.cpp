#include "batch.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cad {

namespace {

class Pool {
public:
    Pool() {
        unsigned n = std::thread::hardware_concurrency();
        n = n == 0 ? 1 : n;
        for (unsigned i = 1; i < n; ++i) workers_.emplace_back([this] { loop(); });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& t : workers_) t.join();
    }
    size_t size() const { return workers_.size() + 1; }

    // The caller works too and returns as soon as every item is done. Each batch is a job of
    // its own that workers hold while they look at it: a worker that wakes late (a loaded
    // machine schedules it milliseconds later) finds every item taken and touches nothing the
    // caller still owns, so the caller never waits for a worker that has not claimed an item.
    void run(size_t n, const std::function<void(size_t)>& fn) {
        std::lock_guard<std::mutex> one_batch_at_a_time(run_mu_);
        auto job = std::make_shared<Job>();
        job->fn = &fn;
        job->n = n;
        {
            std::lock_guard<std::mutex> lk(mu_);
            job_ = job;
            ++generation_;
        }
        cv_.notify_all();
        work(*job);
        {
            std::unique_lock<std::mutex> lk(job->mu);
            job->cv.wait(lk, [&] { return job->done.load() == n; });
        }
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (job_ == job) job_.reset();
        }
        if (job->error) std::rethrow_exception(job->error);
    }

private:
    struct Job {
        const std::function<void(size_t)>* fn = nullptr;  // valid while an item is unclaimed or running
        size_t n = 0;
        std::atomic<size_t> next{0}, done{0};
        std::mutex mu;
        std::condition_variable cv;
        std::exception_ptr error;
    };
    static void work(Job& job) {
        while (true) {
            const size_t i = job.next.fetch_add(1);
            if (i >= job.n) return;
            try {
                (*job.fn)(i);
            } catch (...) {
                std::lock_guard<std::mutex> lk(job.mu);
                if (!job.error) job.error = std::current_exception();
            }
            if (job.done.fetch_add(1) + 1 == job.n) {
                std::lock_guard<std::mutex> lk(job.mu);
                job.cv.notify_all();
            }
        }
    }
    void loop() {
        uint64_t seen = 0;
        while (true) {
            std::shared_ptr<Job> job;
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
                if (stop_) return;
                seen = generation_;
                job = job_;
            }
            if (job) work(*job);
        }
    }
    std::vector<std::thread> workers_;
    std::mutex mu_, run_mu_;
    std::condition_variable cv_;
    std::shared_ptr<Job> job_;  // the batch being run (null between batches)
    uint64_t generation_ = 0;
    bool stop_ = false;
};

Pool& pool() {
    static Pool p;
    return p;
}

}  // namespace

void parallel_for(size_t n, const std::function<void(size_t)>& fn) {
    if (n <= 1 || pool().size() == 1) {
        for (size_t i = 0; i < n; ++i) fn(i);
        return;
    }
    pool().run(n, fn);
}

size_t pool_threads() { return pool().size(); }

}  // namespace cad
