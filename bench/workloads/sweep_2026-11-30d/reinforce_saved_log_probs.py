# pytorch/examples reinforcement_learning/reinforce.py: Policy with saved_log_probs/rewards lists, select_action() sampling a Categorical, finish_episode() computing discounted returns on the host, running_reward
import argparse
import math
from collections import deque
from itertools import count

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

parser = argparse.ArgumentParser(description='PyTorch REINFORCE example')
parser.add_argument('--gamma', type=float, default=0.99, metavar='G')
parser.add_argument('--seed', type=int, default=543, metavar='N')
parser.add_argument('--log-interval', type=int, default=10, metavar='N')
parser.add_argument('--max-episodes', type=int, default=200)
args = parser.parse_args()


class CartPole:
    """The classic cart-pole task (gym's CartPole-v1 equations), episodes capped at 60 steps."""
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    reward_threshold = 57.0
    max_steps = 60

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        self.t = 0
        return np.array(self.state, dtype=np.float32), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + polemass_length * theta_dot ** 2 * sintheta) / total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / total_mass))
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        self.t += 1
        terminated = bool(x < -2.4 or x > 2.4 or theta < -0.2095 or theta > 0.2095)
        truncated = self.t >= self.max_steps
        return np.array(self.state, dtype=np.float32), 1.0, terminated, truncated, {}


env = CartPole(args.seed)
torch.manual_seed(args.seed)
device = "cuda"


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)

        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


policy = Policy().to(device)
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0).to(device)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    R = 0
    policy_loss = []
    returns = deque()
    for r in policy.rewards[::-1]:
        R = r + args.gamma * R
        returns.appendleft(R)
    returns = torch.tensor(returns, device=device)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return policy_loss


def main():
    running_reward = 10
    for i_episode in count(1):
        state, _ = env.reset()
        ep_reward = 0
        for t in range(1, 10000):  # noqa: B007 (read after the loop)
            action = select_action(state)
            state, reward, done, truncated, _ = env.step(action)
            policy.rewards.append(reward)
            ep_reward += reward
            if done or truncated:
                break

        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        last_loss = finish_episode()
        if i_episode % args.log_interval == 0:
            print('Episode {}\tLast reward: {:.2f}\tAverage reward: {:.4f}\tloss {:.4f}'.format(
                i_episode, ep_reward, running_reward, last_loss.item()))
        if running_reward > env.reward_threshold:
            print("Solved! Running reward is now {:.4f} and "
                  "the last episode runs to {} time steps!".format(running_reward, t))
            break
        if i_episode >= args.max_episodes:
            break
    checksum = sum(p.double().sum() for p in policy.parameters()).item()
    print(f"episodes {i_episode} running reward {running_reward:.4f} final loss {last_loss.item():.4f} "
          f"param checksum {checksum:.4f}")


if __name__ == '__main__':
    main()
