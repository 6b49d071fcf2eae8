#include "batch.h"

#include <atomic>
#include <condition_variable>
#include <exception>
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

    // The caller works too and returns as soon as every item is done: a worker that has
    // not woken up by then is not waited for (it finds the job closed and goes back to sleep).
    void run(size_t n, const std::function<void(size_t)>& fn) {
        std::lock_guard<std::mutex> one_batch_at_a_time(run_mu_);
        {
            std::lock_guard<std::mutex> lk(mu_);
            fn_ = &fn;
            n_ = n;
            next_.store(0);
            done_.store(0);
            error_ = nullptr;
            open_ = true;
            ++generation_;
        }
        cv_.notify_all();
        work();
        std::unique_lock<std::mutex> lk(mu_);
        done_cv_.wait(lk, [this] { return done_.load() == n_ && active_ == 0; });
        open_ = false;
        fn_ = nullptr;
        if (error_) std::rethrow_exception(error_);
    }

private:
    void work() {
        while (true) {
            size_t i = next_.fetch_add(1);
            if (i >= n_) return;
            try {
                (*fn_)(i);
            } catch (...) {
                std::lock_guard<std::mutex> lk(mu_);
                if (!error_) error_ = std::current_exception();
            }
            if (done_.fetch_add(1) + 1 == n_) {
                std::lock_guard<std::mutex> lk(mu_);
                done_cv_.notify_all();
            }
        }
    }
    void loop() {
        uint64_t seen = 0;
        while (true) {
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
                if (stop_) return;
                seen = generation_;
                if (!open_) continue;  // that batch is already finished
                ++active_;
            }
            work();
            {
                std::lock_guard<std::mutex> lk(mu_);
                --active_;
                done_cv_.notify_all();
            }
        }
    }
    std::vector<std::thread> workers_;
    std::mutex mu_, run_mu_;
    std::condition_variable cv_, done_cv_;
    const std::function<void(size_t)>* fn_ = nullptr;
    std::atomic<size_t> next_{0}, done_{0};
    size_t n_ = 0, active_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false, open_ = false;
    std::exception_ptr error_;
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
