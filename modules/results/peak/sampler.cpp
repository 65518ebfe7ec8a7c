// attn.peak -- the CPU sampler: how busy other processes kept the machine while a probe ran
// (/proc/stat minus this process's /proc/self/stat), and the summary of a probe's repetitions.
module;
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#include <unistd.h>
module attn.peak;
import :probe;

namespace attn::peak {

cpu_ticks cpu_ticks::now() {
    cpu_ticks t;
    std::ifstream proc_stat("/proc/stat");
    std::string cpu;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (proc_stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal && cpu == "cpu")
        t.all = user + nice + system + irq + softirq + steal;
    std::ifstream self_stat("/proc/self/stat");
    std::string line;
    std::getline(self_stat, line);
    const auto paren = line.rfind(')'); // the command name may hold spaces
    if (paren != std::string::npos) {
        std::istringstream rest(line.substr(paren + 2));
        std::string field;
        double utime = 0, stime = 0;
        for (int i = 3; i <= 13 && rest >> field; ++i) {
        } // state .. cmajflt
        if (rest >> utime >> stime) t.self = utime + stime;
    }
    return t;
}

double others_busy(const cpu_ticks& before, double seconds) {
    const cpu_ticks after = cpu_ticks::now();
    const double hz = double(sysconf(_SC_CLK_TCK));
    if (before.all < 0 || before.self < 0 || after.all < 0 || after.self < 0 || hz <= 0 || seconds <= 0) return -1;
    const double others = (after.all - before.all) - (after.self - before.self);
    return std::max(0.0, others / hz / seconds);
}

stats summarise(std::vector<double> samples) {
    stats st;
    st.samples = samples;
    std::sort(samples.begin(), samples.end());
    const std::size_t n = samples.size();
    st.worst = samples.front();
    st.best = samples.back();
    st.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    return st;
}

} // namespace attn::peak
